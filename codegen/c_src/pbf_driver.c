/* pbframework solver driver: one step problem's numeric loop in portable C99.
 *
 * Included (textually) after the generated kernels pbfk_* and the PBF_* size macros written by
 * pbframework.codegen.driver. Nothing here allocates memory or calls the host: every array is caller-owned
 * (size from pbf_work_size), so the same text serves a shared library, an embedded target and, later, a
 * CUDA kernel. casadi_real is double unless PBF_FLOAT is defined (then float).
 *
 * The loops mirror the Python solvers of pbframework.plugins.solvers exactly (same tests, same order,
 * same statistics): lm / jtj_lm (Levenberg-Marquardt, Nielsen damping update, Marquardt scaling or the
 * problem's metric), lbfgs (two-loop recursion, Armijo / approximate-Wolfe backtracking), and the
 * Simulator's failure policy (halving retries, then stop / continue / raise) around each step.
 */

#ifdef PBF_FLOAT
#define PBF_EPS 1.1920928955078125e-07
#else
#define PBF_EPS 2.220446049250313e-16
#endif

#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && !defined(PBF_NO_PRAGMA_OPT)
/* the driver's dense linear algebra is small code: optimise it more than the large generated kernels
   (no -ffast-math: results are identical to -O1) */
#pragma GCC push_options
#pragma GCC optimize("O2")
#define PBF_POP_OPTIONS 1
#endif

/* ---- options (casadi_real opt[PBF_NOPT]) and statistics -------------------------------------------- */
enum {
  PBF_OPT_MAX_ITER = 0, PBF_OPT_GTOL, PBF_OPT_XTOL, PBF_OPT_LAMBDA0, PBF_OPT_METRIC, PBF_OPT_MEMORY,
  PBF_OPT_FIRST_STEP, PBF_OPT_MAX_BACKTRACKS, PBF_OPT_ON_FAILURE, PBF_OPT_MAX_HALVINGS, PBF_OPT_MAX_SPEED,
  PBF_OPT_SHRINK, PBF_OPT_RTOL, PBF_OPT_MAX_STEP, PBF_OPT_RESIDUAL_TOL, PBF_OPT_STALL, PBF_NOPT
};
/* what a rollout does with a step still unconverged after its halvings (pbframework.simulate.FailurePolicy;
   raise is stop here, the host raises) */
enum { PBF_FAIL_STOP = 0, PBF_FAIL_CONTINUE = 1, PBF_FAIL_RAISE = 2 };
/* integer statistics of one step (casadi_int st[PBF_NST]): iterations, converged, reason, evaluations,
   halvings (retries as two half steps, summed), depth (the deepest halving level reached); the reals go to
   casadi_real gn[PBF_NSR]: the final gradient infinity norm and the residual (least squares: ||W r||_2;
   minimize: the gradient norm), the largest over the sub-steps of a halved step */
enum { PBF_ST_ITER = 0, PBF_ST_CONV, PBF_ST_REASON, PBF_ST_EVALS, PBF_ST_HALV, PBF_ST_DEPTH, PBF_NST };
enum { PBF_SR_GRAD = 0, PBF_SR_RESIDUAL, PBF_NSR };
enum {
  PBF_R_GRADIENT = 0, PBF_R_STEP, PBF_R_PRECISION, PBF_R_MAX_ITER, PBF_R_NON_FINITE, PBF_R_LINE_SEARCH,
  PBF_R_EXPLICIT, PBF_R_RESIDUAL, PBF_R_STALLED
};
/* rollout status */
enum { PBF_DONE = 0, PBF_DIVERGED = 1, PBF_FAILED = 2 };

#define PBF_MAXI(a, b) ((a) > (b) ? (a) : (b))
/* lm on a least-squares problem: exact and Gauss-Newton Hessians, Fletcher and Xu's switch */
#define PBF_STALL_AT_FLOOR 3   /* plugins/solvers/lm.py STALL_AT_FLOOR */
#define PBF_HYBRID (PBF_SOLVER == 1 && PBF_KIND == 2)
#define PBF_MX (PBF_NX > 0 ? PBF_NX : 1)
/* directional seeds V and outputs VO, shared by the derivative kernels (NX x BD seeds, outputs of NX, NR or
   NQ rows) and the metric's M V (NQ x BM): each sized for the wider of the two */
#define PBF_NV PBF_MAXI(PBF_MX * PBF_BD, PBF_NQ * PBF_BM)
#define PBF_NVO PBF_MAXI(PBF_MAXI(PBF_MAXI(PBF_NX, PBF_NR), PBF_NQ) * PBF_BD, PBF_NQ * PBF_BM)

typedef struct {
  casadi_real *kw;                 /* kernel scratch, PBF_SZ_W */
  casadi_int *iw;                  /* kernel integer scratch, PBF_SZ_IW */
  casadi_real *p, *z;              /* parameters, hoisted parametric values */
  casadi_real *x, *xn, *g, *gn, *d, *t1, *dg;
  casadi_real *H, *Hn, *A;         /* NX x NX, column-major */
  casadi_real *Hg, *Hgn;           /* Gauss-Newton Hessians of the hybrid lm (NX x NX) */
  casadi_real *r, *J, *c;          /* residual, Jacobian, weighted residual (least squares) */
  casadi_real *M, *LM;             /* metric NQ x NQ and its Cholesky factor */
  casadi_real *V, *VO;             /* directional seeds and outputs */
  casadi_real *S, *Y, *al, *rh;    /* lbfgs pairs */
  casadi_real *lev;                /* halving levels: 4 states each */
  casadi_real *st;                 /* the start's RK4 runs (9 NQ; PBF_HAVE_START only) */
  casadi_real *s, *sn;             /* rollout states */
  casadi_int mem, nlev;
  int have_metric;
} pbf_ws;

static casadi_int pbf_opt_int(const casadi_real* opt, int k) { return (casadi_int)opt[k]; }

/* Sizes of the caller-owned work arrays for options opt (reals, integers). */
PBF_EXPORT void pbf_work_size(const casadi_real* opt, casadi_int* n_real, casadi_int* n_int) {
  casadi_int m = pbf_opt_int(opt, PBF_OPT_MEMORY), lev = pbf_opt_int(opt, PBF_OPT_MAX_HALVINGS) + 1;
  casadi_int n = 0;
  if (m < 1) m = 1;
  if (lev < 1) lev = 1;
  n += PBF_SZ_W + PBF_NP + PBF_NZ + 7 * PBF_MX + (PBF_HYBRID ? 5 : 3) * PBF_MX * PBF_MX;
  n += 2 * PBF_NR + PBF_NR * PBF_MX + 2 * PBF_NQ * PBF_NQ;
  n += PBF_NV + PBF_NVO;
  n += 2 * m * PBF_MX + 2 * m;
  n += lev * 4 * PBF_NS + 2 * PBF_NS;
  n += PBF_HAVE_START ? 9 * PBF_NQ : 0;
  /* padded to whole 128-byte blocks (plus one), so the per-thread blocks of a batch share no cache line */
  *n_real = ((n + 16 + 15) / 16) * 16;
  *n_int = ((PBF_SZ_IW + 1 + 16 + 15) / 16) * 16;
}

static void pbf_ws_init(const casadi_real* opt, casadi_real* w, casadi_int* iw, pbf_ws* ws) {
  casadi_int m = pbf_opt_int(opt, PBF_OPT_MEMORY), lev = pbf_opt_int(opt, PBF_OPT_MAX_HALVINGS) + 1;
  if (m < 1) m = 1;
  if (lev < 1) lev = 1;
  ws->mem = m;
  ws->nlev = lev;
  ws->iw = iw;
  ws->kw = w; w += PBF_SZ_W;
  ws->p = w; w += PBF_NP;
  ws->z = w; w += PBF_NZ;
  ws->x = w; w += PBF_MX;
  ws->xn = w; w += PBF_MX;
  ws->g = w; w += PBF_MX;
  ws->gn = w; w += PBF_MX;
  ws->d = w; w += PBF_MX;
  ws->t1 = w; w += PBF_MX;
  ws->dg = w; w += PBF_MX;
  ws->H = w; w += PBF_MX * PBF_MX;
  ws->Hn = w; w += PBF_MX * PBF_MX;
  ws->A = w; w += PBF_MX * PBF_MX;
#if PBF_HYBRID
  ws->Hg = w; w += PBF_MX * PBF_MX;
  ws->Hgn = w; w += PBF_MX * PBF_MX;
#else
  ws->Hg = ws->Hgn = 0;
#endif
  ws->r = w; w += PBF_NR;
  ws->c = w; w += PBF_NR;
  ws->J = w; w += PBF_NR * PBF_MX;
  ws->M = w; w += PBF_NQ * PBF_NQ;
  ws->LM = w; w += PBF_NQ * PBF_NQ;
  ws->V = w; w += PBF_NV;
  ws->VO = w; w += PBF_NVO;
  ws->S = w; w += m * PBF_MX;
  ws->Y = w; w += m * PBF_MX;
  ws->al = w; w += m;
  ws->rh = w; w += m;
  ws->lev = w; w += lev * 4 * PBF_NS;
  ws->s = w; w += PBF_NS;
  ws->sn = w; w += PBF_NS;
#if PBF_HAVE_START
  ws->st = w; w += 9 * PBF_NQ;
#else
  ws->st = 0;
#endif
  ws->have_metric = 0;
}

/* ---- kernel calls ---------------------------------------------------------------------------------- */
#define PBF_KCALL(FN, NI, IN, NO, OUT) do {                                                              \
    const casadi_real* a_[PBF_SZ_ARG]; casadi_real* r_[PBF_SZ_RES]; int i_;                              \
    for (i_ = 0; i_ < PBF_SZ_ARG; ++i_) a_[i_] = i_ < (NI) ? (IN)[i_] : 0;                                \
    for (i_ = 0; i_ < PBF_SZ_RES; ++i_) r_[i_] = i_ < (NO) ? (OUT)[i_] : 0;                               \
    (void)FN(a_, r_, ws->iw, ws->kw, 0);                                                                 \
  } while (0)

/* ---- small dense helpers ----------------------------------------------------------------------------- */
static int pbf_finite(casadi_real v) { return v - v == 0; }   /* false for inf and nan */
static int pbf_all_finite(const casadi_real* v, casadi_int n) {
  casadi_int i;
  for (i = 0; i < n; ++i) if (!pbf_finite(v[i])) return 0;
  return 1;
}
static casadi_real pbf_norm_inf(const casadi_real* v, casadi_int n) {
  casadi_real m = 0; casadi_int i;
  for (i = 0; i < n; ++i) { casadi_real a = fabs(v[i]); if (a > m || a != a) m = a; }
  return m;
}
/* four independent partial sums: the dense loops below are dot products, and one running sum serialises
   them on the floating-point add latency (no vectorisation of a reduction without -ffast-math).
   pbframework/linalg.py repeats pbf_dot, pbf_chol, pbf_chol_solve and pbf_gemv sum for sum, so that the
   Python solvers round as this driver does: change them together (tests/test_backend_agreement.py). */
static casadi_real pbf_dot(const casadi_real* a, const casadi_real* b, casadi_int n) {
  casadi_real s0 = 0, s1 = 0, s2 = 0, s3 = 0; casadi_int i;
  for (i = 0; i + 4 <= n; i += 4) {
    s0 += a[i] * b[i]; s1 += a[i + 1] * b[i + 1]; s2 += a[i + 2] * b[i + 2]; s3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; ++i) s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}
static void pbf_copy(const casadi_real* a, casadi_real* b, casadi_int n) {
  casadi_int i;
  for (i = 0; i < n; ++i) b[i] = a[i];
}
/* y = A x, A n x n column-major */
static void pbf_gemv(const casadi_real* A, const casadi_real* x, casadi_real* y, casadi_int n) {
  casadi_int i, j;
  for (i = 0; i < n; ++i) y[i] = 0;
  for (j = 0; j < n; ++j) { casadi_real xj = x[j]; const casadi_real* c = A + j * n; for (i = 0; i < n; ++i) y[i] += c[i] * xj; }
}
/* Upper Cholesky A = U^T U in place (upper triangle of A read and overwritten, column-major), as LAPACK
   potrf('U'): fails (returns 1) on a pivot that is not positive or not a number. */
static int pbf_chol(casadi_real* A, casadi_int n) {
  casadi_int i, j;
  for (j = 0; j < n; ++j) {
    casadi_real* cj = A + j * n;
    casadi_real ajj = cj[j] - pbf_dot(cj, cj, j);
    if (!(ajj > 0) || ajj != ajj) return 1;
    ajj = sqrt(ajj);
    cj[j] = ajj;
    for (i = j + 1; i < n; ++i) {
      casadi_real* ci = A + i * n;
      ci[j] = (ci[j] - pbf_dot(cj, ci, j)) / ajj;
    }
  }
  return 0;
}
/* solve U^T U x = b in place (U from pbf_chol) */
static void pbf_chol_solve(const casadi_real* U, casadi_real* b, casadi_int n) {
  casadi_int i, k;
  for (i = 0; i < n; ++i) {              /* U^T y = b: row i of U^T is column i of U (contiguous) */
    const casadi_real* ci = U + i * n;
    b[i] = (b[i] - pbf_dot(ci, b, i)) / ci[i];
  }
  for (i = n - 1; i >= 0; --i) {         /* U x = y by columns (contiguous): x_i, then remove it above */
    const casadi_real* ci = U + i * n;
    casadi_real xi = b[i] / ci[i];
    b[i] = xi;
    for (k = 0; k < i; ++k) b[k] -= ci[k] * xi;
  }
}

/* ---- the metric (block-diagonal mass matrix of the step start) --------------------------------------- */
static void pbf_metric(pbf_ws* ws) {
#if PBF_METRIC == 1
  { const casadi_real* in[1]; casadi_real* out[1];
    in[0] = ws->p; out[0] = ws->M;
    PBF_KCALL(pbfk_metric, 1, in, 1, out); }
#elif PBF_METRIC == 2
  { casadi_int c0, j, i;
    const casadi_real* in[2]; casadi_real* out[1];
    for (i = 0; i < PBF_NQ * PBF_BM; ++i) ws->V[i] = 0;
    for (c0 = 0; c0 < PBF_NQ; c0 += PBF_BM) {
      for (j = 0; j < PBF_BM && c0 + j < PBF_NQ; ++j) ws->V[(c0 + j) + j * PBF_NQ] = 1;
      in[0] = ws->p; in[1] = ws->V; out[0] = ws->VO;
      PBF_KCALL(pbfk_mv, 2, in, 1, out);
      for (j = 0; j < PBF_BM && c0 + j < PBF_NQ; ++j) {
        pbf_copy(ws->VO + j * PBF_NQ, ws->M + (c0 + j) * PBF_NQ, PBF_NQ);
        ws->V[(c0 + j) + j * PBF_NQ] = 0;
      }
    }
  }
#else
  (void)ws;
#endif
}

/* gtol test: ||g||_inf <= gtol, or for least squares ||r||_2 = sqrt(2 f) <= residual_tol */
static int pbf_small_grad(const casadi_real* opt, casadi_real f, const casadi_real* g) {
  casadi_real gn = pbf_norm_inf(g, PBF_NX), f2 = 2 * f;
  return gn <= opt[PBF_OPT_GTOL] || (PBF_KIND == 2 && sqrt(f2 > 0 ? f2 : 0) <= opt[PBF_OPT_RESIDUAL_TOL]);
}

/* a least-squares step problem is square: a stop with ||r||_2 > rtol is a local minimum of ||r||, reported
   unconverged with reason "residual" (the Python solvers' verdict) */
static void pbf_verdict(const casadi_real* opt, casadi_real f, int reason, int* reason_out, int* conv) {
  casadi_real f2 = 2 * f;
  if (PBF_KIND == 2 && sqrt(f2 > 0 ? f2 : 0) > opt[PBF_OPT_RTOL]) { *reason_out = PBF_R_RESIDUAL; *conv = 0; }
  else { *reason_out = reason; *conv = 1; }
}

/* ---- objective, gradient and Hessian at x --------------------------------------------------------- */
#if PBF_KIND == 2 && (PBF_SOLVER == 1 || PBF_SOLVER == 2)
/* r, J of the residual at x (J: NR x NX column-major), weighted by W = blockdiag(M)^-1 with a metric; lm
   and jtj_lm only (l-bfgs has no Jacobian kernels: an unused definition would still call undeclared ones) */
static void pbf_eval_rj(pbf_ws* ws, const casadi_real* x) {
  const casadi_real* in[3];
  casadi_real* out[2];
  casadi_int j, k;
#if PBF_HESS == 1
  in[0] = x; in[1] = ws->z; out[0] = ws->r; out[1] = ws->J;
  PBF_KCALL(pbfk_rj, 2, in, 2, out);
#else
  casadi_int c0, i;
  in[0] = x; in[1] = ws->z; out[0] = ws->r;
  PBF_KCALL(pbfk_r, 2, in, 1, out);
  for (i = 0; i < PBF_NX * PBF_BD; ++i) ws->V[i] = 0;
  for (c0 = 0; c0 < PBF_NX; c0 += PBF_BD) {
    for (j = 0; j < PBF_BD && c0 + j < PBF_NX; ++j) ws->V[(c0 + j) + j * PBF_NX] = 1;
    in[0] = x; in[1] = ws->z; in[2] = ws->V; out[0] = ws->VO;
    PBF_KCALL(pbfk_jv, 3, in, 1, out);
    for (j = 0; j < PBF_BD && c0 + j < PBF_NX; ++j) {
      pbf_copy(ws->VO + j * PBF_NR, ws->J + (c0 + j) * PBF_NR, PBF_NR);
      ws->V[(c0 + j) + j * PBF_NX] = 0;
    }
  }
#endif
#if PBF_WEIGHT
  for (k = 0; k < PBF_NR / PBF_NQ; ++k) pbf_chol_solve(ws->LM, ws->r + k * PBF_NQ, PBF_NQ);
  for (j = 0; j < PBF_NX; ++j) for (k = 0; k < PBF_NR / PBF_NQ; ++k)
    pbf_chol_solve(ws->LM, ws->J + j * PBF_NR + k * PBF_NQ, PBF_NQ);
#else
  (void)j; (void)k;
#endif
}
#endif

#if PBF_SOLVER == 1 || PBF_SOLVER == 2
/* the solver's f, g, H at x (H dense symmetric, column-major): pbframework.step.evaluator. For the hybrid
   lm (least squares) H receives the exact Hessian and Hg the Gauss-Newton one (Hg unused otherwise). */
static void pbf_eval_fgh(pbf_ws* ws, const casadi_real* x, casadi_real* f, casadi_real* g, casadi_real* H,
                         casadi_real* Hg) {
#if PBF_KIND == 1   /* minimize (lm): the objective's exact derivatives */
  const casadi_real* in[3];
  casadi_real* out[3];
  (void)Hg;
#if PBF_HESS == 1
  in[0] = x; in[1] = ws->z; out[0] = f; out[1] = g; out[2] = H;
  PBF_KCALL(pbfk_fgh, 2, in, 3, out);
#else
  casadi_int c0, j, i;
  in[0] = x; in[1] = ws->z; out[0] = f; out[1] = g;
  PBF_KCALL(pbfk_fg, 2, in, 2, out);
  for (i = 0; i < PBF_NX * PBF_BD; ++i) ws->V[i] = 0;
  for (c0 = 0; c0 < PBF_NX; c0 += PBF_BD) {
    for (j = 0; j < PBF_BD && c0 + j < PBF_NX; ++j) ws->V[(c0 + j) + j * PBF_NX] = 1;
    in[0] = x; in[1] = ws->z; in[2] = ws->V; out[0] = ws->VO;
    PBF_KCALL(pbfk_hv, 3, in, 1, out);
    for (j = 0; j < PBF_BD && c0 + j < PBF_NX; ++j) {
      pbf_copy(ws->VO + j * PBF_NX, H + (c0 + j) * PBF_NX, PBF_NX);
      ws->V[(c0 + j) + j * PBF_NX] = 0;
    }
  }
#endif
#else               /* least squares: f = |r|^2 / 2, g = J^T r, H = J^T J (+ sum_k (W r)_k H_k for lm) */
  casadi_int i, j;
#if !PBF_HYBRID
  (void)Hg;
#else
  casadi_real* Hx = H;                    /* exact Hessian = Gauss-Newton + second-order term */
  H = Hg;
#endif
  pbf_eval_rj(ws, x);
  *f = 0.5 * pbf_dot(ws->r, ws->r, PBF_NR);
  for (j = 0; j < PBF_NX; ++j) {
    const casadi_real* cj = ws->J + j * PBF_NR;
    g[j] = pbf_dot(cj, ws->r, PBF_NR);
    for (i = 0; i <= j; ++i) {
      casadi_real s = pbf_dot(ws->J + i * PBF_NR, cj, PBF_NR);
      H[i + j * PBF_NX] = s;
      H[j + i * PBF_NX] = s;
    }
  }
#if PBF_SOLVER == 1
  { /* second-order term with c = W (W r): the exact Hessian of |W r|^2 / 2 */
    const casadi_real* in[4];
    casadi_real* out[1];
    casadi_real* Hc = ws->A;              /* free during an evaluation */
    pbf_copy(ws->r, ws->c, PBF_NR);
#if PBF_WEIGHT
    { casadi_int k; for (k = 0; k < PBF_NR / PBF_NQ; ++k) pbf_chol_solve(ws->LM, ws->c + k * PBF_NQ, PBF_NQ); }
#endif
#if PBF_HESS == 1
    in[0] = x; in[1] = ws->z; in[2] = ws->c; out[0] = Hc;
    PBF_KCALL(pbfk_rh, 3, in, 1, out);
#else
    { casadi_int c0;
      for (i = 0; i < PBF_NX * PBF_BD; ++i) ws->V[i] = 0;
      for (c0 = 0; c0 < PBF_NX; c0 += PBF_BD) {
        for (j = 0; j < PBF_BD && c0 + j < PBF_NX; ++j) ws->V[(c0 + j) + j * PBF_NX] = 1;
        in[0] = x; in[1] = ws->z; in[2] = ws->c; in[3] = ws->V; out[0] = ws->VO;
        PBF_KCALL(pbfk_rhv, 4, in, 1, out);
        for (j = 0; j < PBF_BD && c0 + j < PBF_NX; ++j) {
          pbf_copy(ws->VO + j * PBF_NX, Hc + (c0 + j) * PBF_NX, PBF_NX);
          ws->V[(c0 + j) + j * PBF_NX] = 0;
        }
      } }
#endif
    for (i = 0; i < PBF_NX * PBF_NX; ++i) Hx[i] = H[i] + Hc[i];
  }
#endif
#endif
}

/* Levenberg-Marquardt (plugins/solvers/lm.py, levenberg_marquardt). x in/out; returns the objective. */
static casadi_real pbf_lm(const casadi_real* opt, pbf_ws* ws, casadi_real* xout, casadi_int* st, casadi_real* gnorm) {
  casadi_real *x = ws->x, *xn = ws->xn, *g = ws->g, *gn = ws->gn, *H = ws->H, *Hn = ws->Hn, *tp;
  casadi_real *Hg = ws->Hg, *Hgn = ws->Hgn, *Hu, *Hlast;
  casadi_real *A = ws->A, *d = ws->d, *D = ws->dg;
  casadi_real f, fn, mu, nu, pred, rho, xmax, f_ref, noise;
  casadi_int i, j, b, it = 0, nev = 1, max_iter = pbf_opt_int(opt, PBF_OPT_MAX_ITER), tries, it_ref = 0;
  casadi_int stall = pbf_opt_int(opt, PBF_OPT_STALL);
  int marquardt, conv = 0, reason = PBF_R_MAX_ITER, ok, floor, small_step, use_gn = PBF_HYBRID;
  const casadi_int n = PBF_NX, nb = PBF_NQ > 0 ? PBF_NX / PBF_NQ : 0;
  pbf_copy(xout, x, n);
  pbf_eval_fgh(ws, x, &f, g, H, Hg);
  if (!pbf_finite(f) || !pbf_all_finite(g, n)) {
    st[PBF_ST_ITER] = 0; st[PBF_ST_CONV] = 0; st[PBF_ST_REASON] = PBF_R_NON_FINITE; st[PBF_ST_EVALS] = nev;
    *gnorm = INFINITY;
    return f;
  }
  if (pbf_small_grad(opt, f, g)) {
    pbf_verdict(opt, f, PBF_R_GRADIENT, &reason, &conv);
    st[PBF_ST_ITER] = 0; st[PBF_ST_CONV] = conv; st[PBF_ST_REASON] = reason; st[PBF_ST_EVALS] = nev;
    *gnorm = pbf_norm_inf(g, n);
    return f;
  }
  Hlast = PBF_HYBRID ? Hg : H;                        /* Hs[-1]: the Gauss-Newton one when hybrid */
  marquardt = !(ws->have_metric);
  if (marquardt) {
    casadi_real dmax = 0, fl;
    for (i = 0; i < n; ++i) { D[i] = fabs(Hlast[i + i * n]); if (i == 0 || D[i] > dmax) dmax = D[i]; }
    if (n == 0) dmax = 1.0;
    fl = 1e-12 * (dmax > 1e-300 ? dmax : 1e-300);
    for (i = 0; i < n; ++i) if (!(D[i] >= fl)) D[i] = fl;
  }
  mu = opt[PBF_OPT_LAMBDA0];
  nu = 2.0;
  f_ref = f;                                          /* stall test: the last tenfold decrease of f */
  while (it < max_iter) {
    ++it;
    Hu = use_gn ? Hg : H;
    for (tries = 0; tries < 200; ++tries) {
      /* A = H + mu D (upper triangle suffices) */
      for (j = 0; j < n; ++j) for (i = 0; i <= j; ++i) A[i + j * n] = Hu[i + j * n];
      if (marquardt) {
        for (i = 0; i < n; ++i) A[i + i * n] += mu * D[i];
      } else {
        for (b = 0; b < nb; ++b) for (j = 0; j < PBF_NQ; ++j) for (i = 0; i <= j; ++i)
          A[(b * PBF_NQ + i) + (b * PBF_NQ + j) * n] += mu * ws->M[i + j * PBF_NQ];
      }
      if (!pbf_chol(A, n)) {
        for (i = 0; i < n; ++i) d[i] = g[i];
        pbf_chol_solve(A, d, n);
        for (i = 0; i < n; ++i) d[i] = -d[i];
        if (pbf_all_finite(d, n) && pbf_norm_inf(d, n) <= opt[PBF_OPT_MAX_STEP]) break;
      } else if (PBF_HYBRID && !use_gn) {             /* exact Hessian indefinite: Gauss-Newton this time */
        use_gn = 1;
        Hu = Hg;
        continue;
      }
      mu = mu * 4.0 > 1e-12 ? mu * 4.0 : 1e-12;
    }
    pbf_gemv(Hu, d, ws->t1, n);
    pred = -(pbf_dot(g, d, n) + 0.5 * pbf_dot(d, ws->t1, n));
    for (i = 0; i < n; ++i) xn[i] = x[i] + d[i];
    pbf_eval_fgh(ws, xn, &fn, gn, Hn, Hgn);
    ++nev;
    xmax = pbf_norm_inf(x, n);
    small_step = pbf_norm_inf(d, n) <= opt[PBF_OPT_XTOL] * (1.0 + xmax);
    ok = pbf_finite(fn) && pbf_all_finite(gn, n) && pbf_all_finite(Hn, n * n)
         && (!PBF_HYBRID || pbf_all_finite(Hgn, n * n));
    rho = (ok && pred > 0) ? (f - fn) / pred : -1.0;
    noise = 10.0 * PBF_EPS * (fabs(f) + fabs(fn));   /* rounding error of f - fn */
    floor = ok && pred <= noise && fabs(f - fn) <= noise;
    /* at the objective's rounding floor f cannot tell; the smaller gradient can (plugins/solvers/lm.py) */
    if (floor && !(rho > 1e-4) && pbf_norm_inf(gn, n) < pbf_norm_inf(g, n)) rho = 1.0;
    if (rho > 1e-4) {
      casadi_real c;
      if (PBF_HYBRID) use_gn = (f - fn) >= 0.2 * f;   /* Fletcher-Xu: Gauss-Newton while it removes 20% */
      tp = x; x = xn; xn = tp;
      tp = g; g = gn; gn = tp;
      tp = H; H = Hn; Hn = tp;
      tp = Hg; Hg = Hgn; Hgn = tp;
      Hlast = PBF_HYBRID ? Hg : H;
      f = fn;
      if (marquardt) for (i = 0; i < n; ++i) { casadi_real a = fabs(Hlast[i + i * n]); if (a > D[i]) D[i] = a; }
      if (rho > 0.25) {
        mu *= opt[PBF_OPT_SHRINK];
      } else {
        c = 1.0 - pow(2.0 * rho - 1.0, 3.0);
        mu *= (c > 1.0 / 3.0 ? c : 1.0 / 3.0);
      }
      if (!(mu >= 1e-15)) mu = 1e-15;
      nu = 2.0;
      if (pbf_small_grad(opt, f, g)) { pbf_verdict(opt, f, PBF_R_GRADIENT, &reason, &conv); break; }
      if (small_step) { pbf_verdict(opt, f, PBF_R_STEP, &reason, &conv); break; }
    } else {
      if (floor) { pbf_verdict(opt, f, PBF_R_PRECISION, &reason, &conv); break; }
      mu *= nu;
      nu *= 2.0;
    }
    if (f <= 0.1 * f_ref) { f_ref = f; it_ref = it; }
    else if (PBF_KIND == 2 && stall > 0
             && it - it_ref >= (2.0 * f <= opt[PBF_OPT_RTOL] * opt[PBF_OPT_RTOL] && stall > PBF_STALL_AT_FLOOR
                                ? PBF_STALL_AT_FLOOR : stall)) { pbf_verdict(opt, f, PBF_R_STALLED, &reason, &conv); reason = PBF_R_STALLED; break; }
  }
  pbf_copy(x, xout, n);
  st[PBF_ST_ITER] = it; st[PBF_ST_CONV] = conv; st[PBF_ST_REASON] = reason; st[PBF_ST_EVALS] = nev;
  *gnorm = pbf_norm_inf(g, n);
  return f;
}
#endif

#if PBF_SOLVER == 3
static void pbf_eval_fg(pbf_ws* ws, const casadi_real* x, casadi_real* f, casadi_real* g) {
#if PBF_KIND == 1
  const casadi_real* in[2]; casadi_real* out[2];
  in[0] = x; in[1] = ws->z; out[0] = f; out[1] = g;
  PBF_KCALL(pbfk_fg, 2, in, 2, out);
#else   /* f = |W r|^2 / 2, g = J^T W (W r) by one reverse sweep */
  const casadi_real* in[3]; casadi_real* out[1];
  casadi_int k;
  in[0] = x; in[1] = ws->z; out[0] = ws->r;
  PBF_KCALL(pbfk_r, 2, in, 1, out);
#if PBF_WEIGHT
  for (k = 0; k < PBF_NR / PBF_NQ; ++k) pbf_chol_solve(ws->LM, ws->r + k * PBF_NQ, PBF_NQ);
#endif
  pbf_copy(ws->r, ws->c, PBF_NR);
#if PBF_WEIGHT
  for (k = 0; k < PBF_NR / PBF_NQ; ++k) pbf_chol_solve(ws->LM, ws->c + k * PBF_NQ, PBF_NQ);
#endif
  (void)k;
  *f = 0.5 * pbf_dot(ws->r, ws->r, PBF_NR);
  in[0] = x; in[1] = ws->z; in[2] = ws->c; out[0] = g;
  PBF_KCALL(pbfk_vjp, 3, in, 1, out);
#endif
}
/* v <- M^-1 v blockwise (the metric's Cholesky factor in ws->LM) */
static void pbf_h0(pbf_ws* ws, casadi_real* v) {
  casadi_int b;
  if (!ws->have_metric) return;
  for (b = 0; b < PBF_NX / PBF_NQ; ++b) pbf_chol_solve(ws->LM, v + b * PBF_NQ, PBF_NQ);
}
static casadi_real pbf_norm2(const casadi_real* v, casadi_int n) { return sqrt(pbf_dot(v, v, n)); }

/* direction d = -H g by the two-loop recursion over the npair newest pairs (ring buffer, newest at head-1) */
static void pbf_lbfgs_dir(const casadi_real* opt, pbf_ws* ws, const casadi_real* g, casadi_real* d,
                          casadi_int npair, casadi_int head) {
  casadi_int i, k, m = ws->mem;
  const casadi_int n = PBF_NX;
  if (npair == 0) {
    if (ws->have_metric) {
      pbf_copy(g, d, n);
      pbf_h0(ws, d);
      for (i = 0; i < n; ++i) d[i] = -d[i];
    } else {
      casadi_real gi = pbf_norm_inf(g, n), sc;
      sc = opt[PBF_OPT_FIRST_STEP] / (gi > 1e-300 ? gi : 1e-300);
      for (i = 0; i < n; ++i) d[i] = -g[i] * sc;
    }
    return;
  }
  {
    casadi_real* q = ws->t1;
    casadi_real gam;
    const casadi_real *sN, *yN;
    casadi_int newest = (head - 1 + m) % m;
    pbf_copy(g, q, n);
    for (k = 0; k < npair; ++k) {                 /* newest to oldest */
      casadi_int slot = (head - 1 - k + 2 * m) % m;
      const casadi_real *s = ws->S + slot * n, *y = ws->Y + slot * n;
      ws->rh[k] = 1.0 / pbf_dot(y, s, n);
      ws->al[k] = ws->rh[k] * pbf_dot(s, q, n);
      for (i = 0; i < n; ++i) q[i] -= ws->al[k] * y[i];
    }
    sN = ws->S + newest * n; yN = ws->Y + newest * n;
    pbf_copy(yN, ws->d, n);                      /* ws->d as scratch: hy = h0(Y[-1]) */
    pbf_h0(ws, ws->d);
    gam = pbf_dot(sN, yN, n) / pbf_dot(yN, ws->d, n);
    pbf_h0(ws, q);
    for (i = 0; i < n; ++i) d[i] = q[i] * gam;
    for (k = npair - 1; k >= 0; --k) {            /* oldest to newest */
      casadi_int slot = (head - 1 - k + 2 * m) % m;
      const casadi_real *s = ws->S + slot * n, *y = ws->Y + slot * n;
      casadi_real c = ws->al[k] - ws->rh[k] * pbf_dot(y, d, n);
      for (i = 0; i < n; ++i) d[i] += c * s[i];
    }
    for (i = 0; i < n; ++i) d[i] = -d[i];
  }
}

/* L-BFGS (plugins/solvers/lbfgs.py). */
static casadi_real pbf_lbfgs(const casadi_real* opt, pbf_ws* ws, casadi_real* xout, casadi_int* st, casadi_real* gnorm) {
  casadi_real *x = ws->x, *xn = ws->xn, *g = ws->g, *gn = ws->gn, *tp;
  casadi_real *dir = ws->Hn;       /* nx scratch (Hessian storage is unused by lbfgs) */
  casadi_real f, fn, slope, step;
  casadi_int i, it = 0, nev = 1, npair = 0, head = 0, bt;
  casadi_int max_iter = pbf_opt_int(opt, PBF_OPT_MAX_ITER), mbt = pbf_opt_int(opt, PBF_OPT_MAX_BACKTRACKS);
  int conv = 0, reason = PBF_R_MAX_ITER, accepted;
  const casadi_int n = PBF_NX, m = ws->mem;
  pbf_copy(xout, x, n);
  pbf_eval_fg(ws, x, &f, g);
  if (!pbf_finite(f) || !pbf_all_finite(g, n)) {
    st[PBF_ST_ITER] = 0; st[PBF_ST_CONV] = 0; st[PBF_ST_REASON] = PBF_R_NON_FINITE; st[PBF_ST_EVALS] = nev;
    *gnorm = INFINITY;
    return f;
  }
  for (;;) {
    if (pbf_small_grad(opt, f, g)) { pbf_verdict(opt, f, PBF_R_GRADIENT, &reason, &conv); break; }
    if (it >= max_iter) break;
    ++it;
    pbf_lbfgs_dir(opt, ws, g, dir, npair, head);
    slope = pbf_dot(g, dir, n);
    if (!(slope < 0)) {
      npair = 0; head = 0;
      pbf_lbfgs_dir(opt, ws, g, dir, npair, head);
      slope = pbf_dot(g, dir, n);
    }
    { casadi_real dm = pbf_norm_inf(dir, n);
      step = 1.0;
      if (dm > 0 && opt[PBF_OPT_MAX_STEP] / dm < 1.0) step = opt[PBF_OPT_MAX_STEP] / dm; }
    accepted = 0;
    for (bt = 0; bt < mbt; ++bt) {
      for (i = 0; i < n; ++i) xn[i] = x[i] + step * dir[i];
      pbf_eval_fg(ws, xn, &fn, gn);
      ++nev;
      if (pbf_finite(fn) && pbf_all_finite(gn, n)) {
        int armijo = fn <= f + 1e-4 * step * slope;
        int approx = fn <= f + 1e3 * PBF_EPS * fabs(f) && pbf_dot(gn, dir, n) <= (2e-4 - 1.0) * slope;
        if (armijo || approx) { accepted = 1; break; }
      }
      step *= 0.5;
    }
    if (!accepted) {
      int noise = 2.0 * step * fabs(slope) <= 1e3 * PBF_EPS * fabs(f);
      if (noise) pbf_verdict(opt, f, PBF_R_PRECISION, &reason, &conv);
      else { reason = PBF_R_LINE_SEARCH; conv = 0; }
      break;
    }
    {
      casadi_real *s = ws->t1, *y = ws->d, sy, ns, ny;   /* both free once the direction is used */
      for (i = 0; i < n; ++i) { s[i] = xn[i] - x[i]; y[i] = gn[i] - g[i]; }
      sy = pbf_dot(s, y, n); ns = pbf_norm2(s, n); ny = pbf_norm2(y, n);
      if (sy > 1e-12 * ns * ny) {                        /* deque(maxlen=memory).append */
        pbf_copy(s, ws->S + head * n, n);
        pbf_copy(y, ws->Y + head * n, n);
        head = (head + 1) % m;
        if (npair < m) ++npair;
      }
    }
    tp = x; x = xn; xn = tp;
    tp = g; g = gn; gn = tp;
    f = fn;
  }
  pbf_copy(x, xout, n);
  st[PBF_ST_ITER] = it; st[PBF_ST_CONV] = conv; st[PBF_ST_REASON] = reason; st[PBF_ST_EVALS] = nev;
  *gnorm = pbf_norm_inf(g, n);
  return f;
}
#endif

/* ---- one solve: p -> z, metric, solver loop ------------------------------------------------------------ */
static casadi_real pbf_solve_ws(const casadi_real* opt, pbf_ws* ws, casadi_real* x, casadi_int* st, casadi_real* gnorm) {
  casadi_real f = 0;
  st[PBF_ST_HALV] = 0;
  st[PBF_ST_DEPTH] = 0;
#if PBF_SOLVER == 0
  (void)opt; (void)x; (void)ws;
  st[PBF_ST_ITER] = 0; st[PBF_ST_CONV] = 1; st[PBF_ST_REASON] = PBF_R_EXPLICIT; st[PBF_ST_EVALS] = 0;
  *gnorm = 0;
#else
  {
    const casadi_real* in[1]; casadi_real* out[1];
    in[0] = ws->p; out[0] = ws->z;
    PBF_KCALL(pbfk_pre, 1, in, 1, out);
  }
  ws->have_metric = 0;
#if PBF_WEIGHT
  { casadi_int i, j;           /* the residual weight W = blockdiag(M(p))^-1: factor once per step */
    pbf_metric(ws);
    for (j = 0; j < PBF_NQ; ++j) for (i = 0; i <= j; ++i) ws->LM[i + j * PBF_NQ] = ws->M[i + j * PBF_NQ];
    (void)pbf_chol(ws->LM, PBF_NQ); }
#elif PBF_METRIC > 0 && PBF_DAMP
  if (opt[PBF_OPT_METRIC] != 0) {
    pbf_metric(ws);
    ws->have_metric = 1;
#if PBF_SOLVER == 3
    { casadi_int i, j;
      for (j = 0; j < PBF_NQ; ++j) for (i = 0; i <= j; ++i) ws->LM[i + j * PBF_NQ] = ws->M[i + j * PBF_NQ];
      if (pbf_chol(ws->LM, PBF_NQ)) ws->have_metric = 0; }
#endif
  }
#endif
#if PBF_SOLVER == 3
  f = pbf_lbfgs(opt, ws, x, st, gnorm);
#else
  f = pbf_lm(opt, ws, x, st, gnorm);
#endif
#endif
  return f;
}

/* Solve the unknowns of one step: x (in: the initial guess, out: the solution) for parameters p.
   st: PBF_NST integers (iterations, converged, reason, evaluations, halvings); out: gradient norm, objective. */
PBF_EXPORT int pbf_solve(const casadi_real* opt, const casadi_real* p, casadi_real* x, casadi_int* st,
                         casadi_real* out, casadi_real* w, casadi_int* iw) {
  pbf_ws ws;
  casadi_real gnorm = 0, f;
  pbf_ws_init(opt, w, iw, &ws);
  pbf_copy(p, ws.p, PBF_NP);
  f = pbf_solve_ws(opt, &ws, x, st, &gnorm);
  out[0] = gnorm;
  out[1] = f;
  return 0;
}

/* the unknowns x of the step from state s at t of size dt (p = params(s, t, dt, u) left in ws->p, x from
   guess(p)); gnorm: PBF_NSR reals */
static void pbf_solve_at(const casadi_real* opt, pbf_ws* ws, const casadi_real* s, casadi_real t, casadi_real dt,
                         const casadi_real* u, casadi_real* x, casadi_int* st, casadi_real* gnorm) {
  const casadi_real* in[4]; casadi_real* out[1];
  casadi_real tt = t, hh = dt, f;
  in[0] = s; in[1] = &tt; in[2] = &hh; in[3] = u; out[0] = ws->p;
  PBF_KCALL(pbfk_params, 4, in, 1, out);
#if PBF_NX > 0
  in[0] = ws->p; out[0] = x;
  PBF_KCALL(pbfk_guess, 1, in, 1, out);
#else
  x[0] = 0;
#endif
  f = pbf_solve_ws(opt, ws, x, st, gnorm);
#if PBF_KIND == 2
  gnorm[PBF_SR_RESIDUAL] = sqrt(2 * f);        /* f = ||W r||^2 / 2 */
#else
  (void)f;
  gnorm[PBF_SR_RESIDUAL] = gnorm[PBF_SR_GRAD];
#endif
}

/* s_next = advance(solve(guess(p)), p) with p = params(s, t, dt, u): the Simulator's _solve */
static void pbf_solve_step(const casadi_real* opt, pbf_ws* ws, const casadi_real* s, casadi_real t, casadi_real dt,
                           const casadi_real* u, casadi_real* s_next, casadi_int* st, casadi_real* gnorm) {
  const casadi_real* in[2]; casadi_real* out[1];
  casadi_real xs[PBF_MX];
  pbf_solve_at(opt, ws, s, t, dt, u, xs, st, gnorm);
  in[0] = xs; in[1] = ws->p; out[0] = s_next;
  PBF_KCALL(pbfk_advance, 2, in, 1, out);
}

#if PBF_HAVE_START
/* qdd = start_acceleration(q, v, t, u, sign) */
static void pbf_start_acc(pbf_ws* ws, const casadi_real* q, const casadi_real* v, casadi_real t, const casadi_real* u,
                          casadi_real sign, casadi_real* a) {
  const casadi_real* in[5]; casadi_real* out[1];
  casadi_real tt = t, sg = sign;
  in[0] = q; in[1] = v; in[2] = &tt; in[3] = u; in[4] = &sg; out[0] = a;
  PBF_KCALL(pbfk_start, 5, in, 1, out);
}

/* n classical RK4 steps of size h of qdd = start_acceleration(q, v, t, u, sign) from (q0, qd0) at t, u held;
   the configuration at the end in q (pbframework.step._rk4_configuration, the same operations in the same
   order); scratch: the first 6 NQ reals of ws->st */
static void pbf_start_rk4(pbf_ws* ws, const casadi_real* q0, const casadi_real* qd0, casadi_real t, casadi_real h,
                          casadi_int n, const casadi_real* u, casadi_real sign, casadi_real* q) {
  casadi_real *v = ws->st, *qi = v + PBF_NQ, *vi = qi + PBF_NQ, *a = vi + PBF_NQ, *aq = a + PBF_NQ,
              *av = aq + PBF_NQ;
  casadi_real ti;
  casadi_int i, j;
  pbf_copy(q0, q, PBF_NQ);
  pbf_copy(qd0, v, PBF_NQ);
  for (i = 0; i < n; ++i) {
    ti = t + (casadi_real)i * h;
    pbf_start_acc(ws, q, v, ti, u, sign, a);
    for (j = 0; j < PBF_NQ; ++j) {
      aq[j] = v[j]; av[j] = a[j];
      qi[j] = q[j] + h / 2 * v[j]; vi[j] = v[j] + h / 2 * a[j];
    }
    pbf_start_acc(ws, qi, vi, ti + h / 2, u, sign, a);
    for (j = 0; j < PBF_NQ; ++j) {
      aq[j] += 2 * vi[j]; av[j] += 2 * a[j];
      qi[j] = q[j] + h / 2 * vi[j]; vi[j] = v[j] + h / 2 * a[j];
    }
    pbf_start_acc(ws, qi, vi, ti + h / 2, u, sign, a);
    for (j = 0; j < PBF_NQ; ++j) {
      aq[j] += 2 * vi[j]; av[j] += 2 * a[j];
      qi[j] = q[j] + h * vi[j]; vi[j] = v[j] + h * a[j];
    }
    pbf_start_acc(ws, qi, vi, ti + h, u, sign, a);
    for (j = 0; j < PBF_NQ; ++j) {
      aq[j] += vi[j]; av[j] += a[j];
      q[j] += h / 6 * aq[j]; v[j] += h / 6 * av[j];
    }
  }
}
#endif

static void pbf_init_state(pbf_ws* ws, const casadi_real* q, const casadi_real* qd, casadi_real t, casadi_real dt,
                           const casadi_real* u, casadi_real* s) {
  const casadi_real* in[8]; casadi_real* out[1];
  casadi_real tt = t, hh = dt;
#if PBF_HAVE_START
  /* q_start, q_check, q_reverse of pbframework.step.start_configurations: 2n, n and 2n RK4 steps over
     PBF_START_OFFSET dt, the last with the velocity argument of the forces reversed */
  casadi_real *qs = ws->st + 6 * PBF_NQ, *qc = qs + PBF_NQ, *qr = qc + PBF_NQ;
  casadi_real span = (casadi_real)PBF_START_OFFSET * dt;
  pbf_start_rk4(ws, q, qd, t, span / (2 * PBF_START_SUBSTEPS), 2 * PBF_START_SUBSTEPS, u, 1.0, qs);
  pbf_start_rk4(ws, q, qd, t, span / PBF_START_SUBSTEPS, PBF_START_SUBSTEPS, u, 1.0, qc);
  pbf_start_rk4(ws, q, qd, t, span / (2 * PBF_START_SUBSTEPS), 2 * PBF_START_SUBSTEPS, u, -1.0, qr);
  in[5] = qs; in[6] = qc; in[7] = qr;
#else
  in[5] = q; in[6] = q; in[7] = q;
#endif
  in[0] = q; in[1] = qd; in[2] = &tt; in[3] = &hh; in[4] = u; out[0] = s;
  PBF_KCALL(pbfk_init, 8, in, 1, out);
}

/* s' = restart(s, ratio, dt): the state of a step dt re-expressed for a step ratio times as long (identity
   without a restart function) */
static void pbf_restart_raw(pbf_ws* ws, const casadi_real* s, casadi_real ratio, casadi_real dt, casadi_real* out) {
#if PBF_HAVE_RESTART
  const casadi_real* in[3]; casadi_real* o[1];
  casadi_real rr = ratio, hh = dt;
  in[0] = s; in[1] = &rr; in[2] = &hh; o[0] = out;
  PBF_KCALL(pbfk_restart, 3, in, 1, o);
#else
  (void)ws; (void)ratio; (void)dt;
  pbf_copy(s, out, PBF_NS);
#endif
}

#if PBF_HAVE_RESTART && PBF_HAVE_KINETIC
static casadi_real pbf_kinetic(pbf_ws* ws, const casadi_real* s, casadi_real dt) {
  const casadi_real* in[2]; casadi_real* o[1];
  casadi_real hh = dt, T = 0;
  in[0] = s; in[1] = &hh; o[0] = &T;
  PBF_KCALL(pbfk_kinetic, 2, in, 1, o);
  return T;
}
#endif

/* The Simulator's _restart: restart(s, ratio), energy-safe where the problem reports its own kinetic
   energy (the history offset is bisected until the re-expressed state has no more kinetic energy than s).
   tmp: NS scratch. */
static void pbf_restart(pbf_ws* ws, const casadi_real* s, casadi_real dt, casadi_real ratio, casadi_real* out,
                        casadi_real* tmp) {
  pbf_restart_raw(ws, s, ratio, dt, out);
#if PBF_HAVE_RESTART && PBF_HAVE_KINETIC
  {
    casadi_real T0 = pbf_kinetic(ws, s, dt), lo = 0, hi = 1, mid;
    int k;
    if (pbf_kinetic(ws, out, dt * ratio) <= T0 * (1 + 1e-12)) return;
    for (k = 0; k < 40; ++k) {
      mid = 0.5 * (lo + hi);
      pbf_restart_raw(ws, s, ratio * mid, dt, tmp);
      if (pbf_kinetic(ws, tmp, dt * ratio) <= T0) { lo = mid; pbf_copy(tmp, out, PBF_NS); }
      else hi = mid;
    }
    if (!(lo > 0)) pbf_restart_raw(ws, s, 0.0, dt, out);
  }
#else
  (void)tmp;
#endif
}

/* The Simulator's _step: solve; where that does not converge and the halving depth allows, retry as two
   half steps (recursively). The verdict is st[PBF_ST_CONV]; the failure policy is the caller's. */
static void pbf_step_rec(const casadi_real* opt, pbf_ws* ws, const casadi_real* s, casadi_real t, casadi_real dt,
                         const casadi_real* u, casadi_real* s_next, casadi_int* st, casadi_real* gnorm, casadi_int depth) {
  casadi_int st1[PBF_NST], st2[PBF_NST], k;
  casadi_real g1[PBF_NSR], g2[PBF_NSR], half;
  casadi_real *sh, *s1, *s2;
  pbf_solve_step(opt, ws, s, t, dt, u, s_next, st, gnorm);
  if (st[PBF_ST_CONV]) return;
  if (depth >= pbf_opt_int(opt, PBF_OPT_MAX_HALVINGS) || depth + 1 >= ws->nlev) return;
  sh = ws->lev + depth * 4 * PBF_NS; s1 = sh + PBF_NS; s2 = s1 + PBF_NS;
  half = dt / 2.0;
  pbf_restart(ws, s, dt, 0.5, sh, s2 + PBF_NS);
  pbf_step_rec(opt, ws, sh, t, half, u, s1, st1, g1, depth + 1);
  pbf_step_rec(opt, ws, s1, t + half, half, u, s2, st2, g2, depth + 1);
  /* total = StepStats(iterations, 0.0, True, 1, evaluations); total.add(st1); total.add(st2) */
  st[PBF_ST_ITER] += st1[PBF_ST_ITER] + st2[PBF_ST_ITER];
  st[PBF_ST_EVALS] += st1[PBF_ST_EVALS] + st2[PBF_ST_EVALS];
  st[PBF_ST_HALV] = 1 + st1[PBF_ST_HALV] + st2[PBF_ST_HALV];
  st[PBF_ST_DEPTH] = 1 + PBF_MAXI(st1[PBF_ST_DEPTH], st2[PBF_ST_DEPTH]);
  st[PBF_ST_CONV] = st1[PBF_ST_CONV] && st2[PBF_ST_CONV];
  st[PBF_ST_REASON] = st2[PBF_ST_CONV] ? st1[PBF_ST_REASON] : st2[PBF_ST_REASON];
  for (k = 0; k < PBF_NSR; ++k) {
    gnorm[k] = 0.0;
    if (g1[k] > gnorm[k]) gnorm[k] = g1[k];
    if (g2[k] > gnorm[k]) gnorm[k] = g2[k];
  }
  pbf_restart(ws, s2, half, 2.0, s_next, s2 + PBF_NS);
}

/* whether the failure policy ends a rollout at a step with statistics st */
static int pbf_stops(const casadi_real* opt, const casadi_int* st) {
  return !st[PBF_ST_CONV] && (int)opt[PBF_OPT_ON_FAILURE] != PBF_FAIL_CONTINUE;
}

/* One step of the Simulator from state s at time t (inputs u, may be null when PBF_NU == 0); gnorm: PBF_NSR
   reals. Returns 1 where the step did not converge and the failure policy is not continue. */
PBF_EXPORT int pbf_step(const casadi_real* opt, const casadi_real* s, casadi_real t, casadi_real dt,
                        const casadi_real* u, casadi_real* s_next, casadi_int* st, casadi_real* gnorm,
                        casadi_real* w, casadi_int* iw) {
  pbf_ws ws;
  static const casadi_real zero_u[1] = {0};
  pbf_ws_init(opt, w, iw, &ws);
  pbf_step_rec(opt, &ws, s, t, dt, u ? u : zero_u, s_next, st, gnorm, 0);
  return pbf_stops(opt, st);
}

/* The integrator's first state from (q0, qd0) at t0 for timestep dt. */
PBF_EXPORT int pbf_init(const casadi_real* opt, const casadi_real* q0, const casadi_real* qd0, casadi_real t0,
                        casadi_real dt, const casadi_real* u, casadi_real* s0, casadi_real* w, casadi_int* iw) {
  pbf_ws ws;
  static const casadi_real zero_u[1] = {0};
  pbf_ws_init(opt, w, iw, &ws);
  pbf_init_state(&ws, q0, qd0, t0, dt, u ? u : zero_u, s0);
  return 0;
}

/* steps steps from ws->s; step k0 + k of the rollout that started at t0 starts at t0 + (k0 + k) dt, computed
   as one expression so that a rollout continued in pieces (k0 > 0) sees the times of an uninterrupted one */
static casadi_int pbf_rollout_ws(const casadi_real* opt, pbf_ws* ws, casadi_real t0, casadi_int k0, casadi_real dt,
                                 casadi_int steps, const casadi_real* u, casadi_real* S, casadi_int* st,
                                 casadi_real* gn, casadi_int* status) {
  casadi_real *s = ws->s, *sn = ws->sn, *tp, t = k0 ? t0 + (casadi_real)k0 * dt : t0, vmax = opt[PBF_OPT_MAX_SPEED];
  casadi_int k;
  pbf_copy(s, S, PBF_NS);
  *status = PBF_DONE;
  for (k = 0; k < steps; ++k) {
    int bad;
    pbf_step_rec(opt, ws, s, t, dt, u, sn, st + k * PBF_NST, gn + k * PBF_NSR, 0);
    if (pbf_stops(opt, st + k * PBF_NST)) { *status = PBF_FAILED; return k; }
    t = t0 + (casadi_real)(k0 + k + 1) * dt;
    bad = !pbf_all_finite(sn, 2 * PBF_NQ) || (PBF_NQ > 0 && pbf_norm_inf(sn + PBF_NQ, PBF_NQ) > vmax);
    if (bad) { *status = PBF_DIVERGED; return k; }
    pbf_copy(sn, S + (k + 1) * PBF_NS, PBF_NS);
    tp = s; s = sn; sn = tp;
  }
  return steps;
}

/* A whole rollout: steps steps of dt from (q0, qd0) at t0 with constant inputs u (may be null if NU = 0).
   Writes the integrator's states S ((steps+1) x NS, row 0 = the initial state; q = S[:, :NQ], the
   velocity estimate S[:, NQ:2NQ]), per-step statistics st (steps x PBF_NST) and gn (steps x PBF_NSR).
   Returns the number of steps taken; *status = PBF_DONE, PBF_DIVERGED (a state not finite or a speed
   above max_speed: that step is not recorded) or PBF_FAILED (a step unconverged after its halvings under the
   stop or raise policy: not recorded either, its statistics are row k of st and gn). */
PBF_EXPORT casadi_int pbf_rollout(const casadi_real* opt, const casadi_real* q0, const casadi_real* qd0,
                                  casadi_real t0, casadi_real dt, casadi_int steps, const casadi_real* u,
                                  casadi_real* S, casadi_int* st, casadi_real* gn,
                                  casadi_int* status, casadi_real* w, casadi_int* iw) {
  pbf_ws ws;
  static const casadi_real zero_u[1] = {0};
  if (!u) u = zero_u;
  pbf_ws_init(opt, w, iw, &ws);
  pbf_init_state(&ws, q0, qd0, t0, dt, u, ws.s);
  return pbf_rollout_ws(opt, &ws, t0, 0, dt, steps, u, S, st, gn, status);
}

/* As pbf_rollout, continuing from the integrator state s0: row k0 of the S of a rollout that started at t0
   (its step k0 starts at t0 + k0 dt), with the times, and so the results, of that rollout. */
PBF_EXPORT casadi_int pbf_rollout_from(const casadi_real* opt, const casadi_real* s0, casadi_real t0, casadi_int k0,
                                       casadi_real dt, casadi_int steps, const casadi_real* u, casadi_real* S,
                                       casadi_int* st, casadi_real* gn, casadi_int* status, casadi_real* w,
                                       casadi_int* iw) {
  pbf_ws ws;
  static const casadi_real zero_u[1] = {0};
  if (!u) u = zero_u;
  pbf_ws_init(opt, w, iw, &ws);
  pbf_copy(s0, ws.s, PBF_NS);
  return pbf_rollout_ws(opt, &ws, t0, k0, dt, steps, u, S, st, gn, status);
}

/* Timing helper (the loop runs in C, the caller times the call): at parameters p and unknowns x, reps
   times: what = 0 the objective and gradient (lm with full derivatives, lm on a least-squares problem and
   jtj_lm: the whole evaluation),
   1 the solver's evaluation (f, g and H for lm / jtj_lm), 2 the damped Cholesky solve of one LM iteration.
   out[0] receives f, out[1] the first diagonal entry of H (keeps the work observable). */
PBF_EXPORT int pbf_bench(const casadi_real* opt, const casadi_real* p, const casadi_real* x, casadi_int what,
                         casadi_int reps, casadi_real* out, casadi_real* w, casadi_int* iw) {
  pbf_ws wsv, *ws = &wsv;
  casadi_int r;
  casadi_real f = 0, h = 0;
  pbf_ws_init(opt, w, iw, ws);
  pbf_copy(p, ws->p, PBF_NP);
#if PBF_SOLVER == 0
  (void)x; (void)what; (void)reps; (void)r;
#else
  { const casadi_real* in[1]; casadi_real* o[1];
    in[0] = ws->p; o[0] = ws->z;
    PBF_KCALL(pbfk_pre, 1, in, 1, o); }
#if PBF_SOLVER == 3
  for (r = 0; r < reps; ++r) pbf_eval_fg(ws, x, &f, ws->g);
  (void)what;
#else
  if (what == 0) {
#if PBF_SOLVER == 1 && PBF_HESS == 2 && PBF_KIND == 1   /* minimize: pbfk_fg exists (least squares: none) */
    for (r = 0; r < reps; ++r) {
      const casadi_real* in[2]; casadi_real* o[2];
      in[0] = x; in[1] = ws->z; o[0] = &f; o[1] = ws->g;
      PBF_KCALL(pbfk_fg, 2, in, 2, o);
    }
#else
    for (r = 0; r < reps; ++r) pbf_eval_fgh(ws, x, &f, ws->g, ws->H, ws->Hg);
#endif
  } else if (what == 1) {
    for (r = 0; r < reps; ++r) pbf_eval_fgh(ws, x, &f, ws->g, ws->H, ws->Hg);
    h = ws->H[0];
  } else {
    casadi_int i, j;
    pbf_eval_fgh(ws, x, &f, ws->g, ws->H, ws->Hg);
    for (r = 0; r < reps; ++r) {
      for (j = 0; j < PBF_NX; ++j) for (i = 0; i <= j; ++i) ws->A[i + j * PBF_NX] = ws->H[i + j * PBF_NX];
      for (i = 0; i < PBF_NX; ++i) ws->A[i + i * PBF_NX] += 1e-6 * (1.0 + fabs(ws->H[i + i * PBF_NX]));
      if (pbf_chol(ws->A, PBF_NX)) break;
      pbf_copy(ws->g, ws->d, PBF_NX);
      pbf_chol_solve(ws->A, ws->d, PBF_NX);
    }
    h = ws->d[0];
  }
#endif
#endif
  out[0] = f;
  out[1] = h;
  return 0;
}

/* Sizes: nq, nx, ns, np, nu, nr, nz, solver, derivative mode, metric mode, directions, real size. */
PBF_EXPORT void pbf_sizes(casadi_int* out) {
  out[0] = PBF_NQ; out[1] = PBF_NX; out[2] = PBF_NS; out[3] = PBF_NP; out[4] = PBF_NU; out[5] = PBF_NR;
  out[6] = PBF_NZ; out[7] = PBF_SOLVER; out[8] = PBF_HESS; out[9] = PBF_METRIC; out[10] = PBF_BD;
  out[11] = (casadi_int)sizeof(casadi_real);
}

#ifdef PBF_POP_OPTIONS
#pragma GCC pop_options
#endif
