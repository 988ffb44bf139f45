/* pbframework solver driver, part 1 of 4: options, statistics codes and the caller-owned workspace.
 *
 * The driver (pbf_workspace.c, pbf_linalg.c, pbf_solvers.c, pbf_rollout.c, in this order) is one step
 * problem's numeric loop in portable C99, included (textually) after the generated kernels pbfk_* and the
 * PBF_* size macros written by pbframework.codegen.step_library. Nothing in it allocates memory or calls
 * the host: every array is caller-owned (size from pbf_work_size), so the same text serves a shared
 * library, an embedded target and, later, a CUDA kernel. casadi_real is double unless PBF_FLOAT is defined
 * (then float).
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
#define PBF_NV PBF_MAXI(PBF_MX * PBF_BD, PBF_NVEL * PBF_BM)
#define PBF_NVO PBF_MAXI(PBF_MAXI(PBF_MAXI(PBF_NX, PBF_NR), PBF_NVEL) * PBF_BD, PBF_NVEL * PBF_BM)

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
  n += 2 * PBF_NR + PBF_NR * PBF_MX + 2 * PBF_NVEL * PBF_NVEL;
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
  ws->M = w; w += PBF_NVEL * PBF_NVEL;
  ws->LM = w; w += PBF_NVEL * PBF_NVEL;
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
