/* pbframework solver driver, part 3 of 4: the solvers (lm / jtj_lm, lbfgs) on one step problem, and
 * pbf_solve: parameters -> hoisted values, metric, solver loop. */

/* ---- the metric (block-diagonal mass matrix of the step start) --------------------------------------- */
static void pbf_metric(pbf_ws* ws) {
#if PBF_METRIC == 1
  { const casadi_real* in[1]; casadi_real* out[1];
    in[0] = ws->p; out[0] = ws->M;
    PBF_KCALL(pbfk_metric, 1, in, 1, out); }
#elif PBF_METRIC == 2
  { casadi_int c0, j, i;
    const casadi_real* in[2]; casadi_real* out[1];
    for (i = 0; i < PBF_NVEL * PBF_BM; ++i) ws->V[i] = 0;
    for (c0 = 0; c0 < PBF_NVEL; c0 += PBF_BM) {
      for (j = 0; j < PBF_BM && c0 + j < PBF_NVEL; ++j) ws->V[(c0 + j) + j * PBF_NVEL] = 1;
      in[0] = ws->p; in[1] = ws->V; out[0] = ws->VO;
      PBF_KCALL(pbfk_mv, 2, in, 1, out);
      for (j = 0; j < PBF_BM && c0 + j < PBF_NVEL; ++j) {
        pbf_copy(ws->VO + j * PBF_NVEL, ws->M + (c0 + j) * PBF_NVEL, PBF_NVEL);
        ws->V[(c0 + j) + j * PBF_NVEL] = 0;
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
  for (k = 0; k < PBF_NR / PBF_NVEL; ++k) pbf_chol_solve(ws->LM, ws->r + k * PBF_NVEL, PBF_NVEL);
  for (j = 0; j < PBF_NX; ++j) for (k = 0; k < PBF_NR / PBF_NVEL; ++k)
    pbf_chol_solve(ws->LM, ws->J + j * PBF_NR + k * PBF_NVEL, PBF_NVEL);
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
    { casadi_int k; for (k = 0; k < PBF_NR / PBF_NVEL; ++k) pbf_chol_solve(ws->LM, ws->c + k * PBF_NVEL, PBF_NVEL); }
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
  const casadi_int n = PBF_NX, nb = PBF_NVEL > 0 ? PBF_NX / PBF_NVEL : 0;
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
        for (b = 0; b < nb; ++b) for (j = 0; j < PBF_NVEL; ++j) for (i = 0; i <= j; ++i)
          A[(b * PBF_NVEL + i) + (b * PBF_NVEL + j) * n] += mu * ws->M[i + j * PBF_NVEL];
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
  for (k = 0; k < PBF_NR / PBF_NVEL; ++k) pbf_chol_solve(ws->LM, ws->r + k * PBF_NVEL, PBF_NVEL);
#endif
  pbf_copy(ws->r, ws->c, PBF_NR);
#if PBF_WEIGHT
  for (k = 0; k < PBF_NR / PBF_NVEL; ++k) pbf_chol_solve(ws->LM, ws->c + k * PBF_NVEL, PBF_NVEL);
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
  for (b = 0; b < PBF_NX / PBF_NVEL; ++b) pbf_chol_solve(ws->LM, v + b * PBF_NVEL, PBF_NVEL);
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
    for (j = 0; j < PBF_NVEL; ++j) for (i = 0; i <= j; ++i) ws->LM[i + j * PBF_NVEL] = ws->M[i + j * PBF_NVEL];
    (void)pbf_chol(ws->LM, PBF_NVEL); }
#elif PBF_METRIC > 0 && PBF_DAMP
  if (opt[PBF_OPT_METRIC] != 0) {
    pbf_metric(ws);
    ws->have_metric = 1;
#if PBF_SOLVER == 3
    { casadi_int i, j;
      for (j = 0; j < PBF_NVEL; ++j) for (i = 0; i <= j; ++i) ws->LM[i + j * PBF_NVEL] = ws->M[i + j * PBF_NVEL];
      if (pbf_chol(ws->LM, PBF_NVEL)) ws->have_metric = 0; }
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
