/* pbframework solver driver, per-iteration batch (issue 22 item 2; appended by pbframework.codegen.cuda after
 * pbf_rollout.c): every trajectory's rollout as a resumable state machine, so that ONE launch performs one
 * Levenberg-Marquardt iteration (lm / jtj_lm, its damped dense Cholesky included) for every trajectory,
 * whatever step or halving level it is on. A launch also does the bookkeeping around that iteration: the
 * setup of a solve (params, guess, hoisted values, metric, first evaluation), the end of a solve (advance,
 * halving into two half steps, recombining them, recording a step, the failure policy, the horizon).
 *
 * The arithmetic is pbf_lm / pbf_step_rec / pbf_rollout_ws operation for operation (the pointer swaps of
 * pbf_lm become a parity flag, the recursion of pbf_step_rec an explicit stack of frames), so a batch run
 * launch by launch equals pbf_rollout's bits, trajectory by trajectory (tests/test_cuda_launch.py).
 *
 * Memory: the controller of trajectory i (phase, step, frame stack, the solver's scalars) lives in two
 * structure-of-arrays buffers, integers I and reals R: field f of trajectory i at [f * M + i], so the
 * threads of a warp touch consecutive words. The dense solver memory (x, g, H, the Cholesky factor, the
 * halving levels' states) stays in each trajectory's own slice of W / IW (pbf_work_size, 128-byte padded). */

#if !(PBF_SOLVER == 1 || PBF_SOLVER == 2)
#error "the per-iteration batch (pbf_iter_*) drives lm and jtj_lm only"
#endif

#ifdef __CUDA_ARCH__            /* device pass of nvcc; the host pass and host C count plainly */
#define PBF_COUNT(p) atomicAdd((unsigned long long int*)(p), 1ULL)
#else
#define PBF_COUNT(p) (++*(p))
#endif

/* phases of a trajectory */
enum { PBF_PH_INIT = 0, PBF_PH_SETUP, PBF_PH_ITER, PBF_PH_DONE };
/* integer controller fields; then per halving level d: the frame's child index (0 top, 1 first half, 2
   second half), its statistics and its first child's */
enum {
  PBF_I_PHASE = 0, PBF_I_K, PBF_I_DEPTH, PBF_I_IT, PBF_I_ITREF, PBF_I_NEV, PBF_I_USEGN, PBF_I_MARQ, PBF_I_CONV,
  PBF_I_REASON, PBF_I_FLIP, PBF_I_HAVEM, PBF_NI0
};
enum { PBF_L_CHILD = 0, PBF_L_ST = 1, PBF_L_ST1 = 1 + PBF_NST, PBF_NIL = 1 + 2 * PBF_NST };
/* real controller fields; then per level: the frame's start time, step size, gradient norms and its first
   child's */
enum { PBF_Q_F = 0, PBF_Q_MU, PBF_Q_NU, PBF_Q_FREF, PBF_NQ0 };
enum { PBF_QL_T = 0, PBF_QL_DT, PBF_QL_G = 2, PBF_QL_G1 = 2 + PBF_NSR, PBF_NQL = 2 + 2 * PBF_NSR };

typedef struct {
  casadi_int M, i;
  casadi_int* I;
  casadi_real* R;
} pbf_tj;

#define PBF_TI(c, f) ((c)->I[(casadi_int)(f) * (c)->M + (c)->i])
#define PBF_TR(c, f) ((c)->R[(casadi_int)(f) * (c)->M + (c)->i])
#define PBF_LI(c, d, f) PBF_TI(c, PBF_NI0 + (d) * PBF_NIL + (f))
#define PBF_LR(c, d, f) PBF_TR(c, PBF_NQ0 + (d) * PBF_NQL + (f))

/* Controller fields per trajectory for options opt: integers, reals (each buffer is that many times M). */
PBF_EXPORT void pbf_iter_sizes(const casadi_real* opt, casadi_int* n_int, casadi_int* n_real) {
  casadi_int lev = pbf_opt_int(opt, PBF_OPT_MAX_HALVINGS) + 1;
  if (lev < 1) lev = 1;
  *n_int = PBF_NI0 + lev * PBF_NIL;
  *n_real = PBF_NQ0 + lev * PBF_NQL;
}

/* the state a frame starts from and the one it produces (pbf_step_rec's s and s_next) */
static casadi_real* pbf_frame_in(pbf_ws* ws, pbf_tj* c, casadi_int d) {
  casadi_real* base;
  if (d == 0) return ws->s;
  base = ws->lev + (d - 1) * 4 * PBF_NS;
  return PBF_LI(c, d, PBF_L_CHILD) == 1 ? base : base + PBF_NS;
}
static casadi_real* pbf_frame_out(pbf_ws* ws, pbf_tj* c, casadi_int d) {
  casadi_real* base;
  if (d == 0) return ws->sn;
  base = ws->lev + (d - 1) * 4 * PBF_NS;
  return PBF_LI(c, d, PBF_L_CHILD) == 1 ? base + PBF_NS : base + 2 * PBF_NS;
}

/* the solver's buffers of this iteration (pbf_lm's x, xn, g, gn, H, Hn, Hg, Hgn after its swaps) */
typedef struct { casadi_real *x, *xn, *g, *gn, *H, *Hn, *Hg, *Hgn; } pbf_bufs;
static void pbf_bufs_of(pbf_ws* ws, int flip, pbf_bufs* b) {
  if (!flip) { b->x = ws->x; b->xn = ws->xn; b->g = ws->g; b->gn = ws->gn; b->H = ws->H; b->Hn = ws->Hn;
               b->Hg = ws->Hg; b->Hgn = ws->Hgn; }
  else { b->x = ws->xn; b->xn = ws->x; b->g = ws->gn; b->gn = ws->g; b->H = ws->Hn; b->Hn = ws->H;
         b->Hg = ws->Hgn; b->Hgn = ws->Hg; }
}

/* the end of the solve of frame d (pbf_lm's return, then pbf_solve_at and pbf_solve_step): statistics, gradient
   norms, s_next = advance(x, p) */
static void pbf_iter_solved(pbf_ws* ws, pbf_tj* c, casadi_int d, casadi_real f, const casadi_real* x,
                            casadi_real gnorm_grad) {
  const casadi_real* in[2]; casadi_real* out[1];
  PBF_LI(c, d, PBF_L_ST + PBF_ST_ITER) = PBF_TI(c, PBF_I_IT);
  PBF_LI(c, d, PBF_L_ST + PBF_ST_CONV) = PBF_TI(c, PBF_I_CONV);
  PBF_LI(c, d, PBF_L_ST + PBF_ST_REASON) = PBF_TI(c, PBF_I_REASON);
  PBF_LI(c, d, PBF_L_ST + PBF_ST_EVALS) = PBF_TI(c, PBF_I_NEV);
  PBF_LI(c, d, PBF_L_ST + PBF_ST_HALV) = 0;
  PBF_LI(c, d, PBF_L_ST + PBF_ST_DEPTH) = 0;
  PBF_LR(c, d, PBF_QL_G + PBF_SR_GRAD) = gnorm_grad;
#if PBF_KIND == 2
  PBF_LR(c, d, PBF_QL_G + PBF_SR_RESIDUAL) = sqrt(2 * f);
#else
  (void)f;
  PBF_LR(c, d, PBF_QL_G + PBF_SR_RESIDUAL) = gnorm_grad;
#endif
  in[0] = x; in[1] = ws->p; out[0] = pbf_frame_out(ws, c, d);
  PBF_KCALL(pbfk_advance, 2, in, 1, out);
}

/* the setup of frame d's solve: pbf_solve_at's params and guess, pbf_solve_ws's hoisted values and metric,
   pbf_lm up to its loop. Returns 1 where the solve ended without an iteration. */
static int pbf_iter_setup(const casadi_real* opt, pbf_ws* ws, pbf_tj* c, const casadi_real* u) {
  casadi_int d = PBF_TI(c, PBF_I_DEPTH), i;
  const casadi_real* in[4]; casadi_real* out[1];
  casadi_real tt = PBF_LR(c, d, PBF_QL_T), hh = PBF_LR(c, d, PBF_QL_DT), f, mu;
  casadi_real *x = ws->x, *g = ws->g, *H = ws->H, *Hg = ws->Hg, *D = ws->dg, *Hlast;
  int conv = 0, reason = PBF_R_MAX_ITER;
  const casadi_int n = PBF_NX;
  in[0] = pbf_frame_in(ws, c, d); in[1] = &tt; in[2] = &hh; in[3] = u; out[0] = ws->p;
  PBF_KCALL(pbfk_params, 4, in, 1, out);
  in[0] = ws->p; out[0] = x;
  PBF_KCALL(pbfk_guess, 1, in, 1, out);
  in[0] = ws->p; out[0] = ws->z;
  PBF_KCALL(pbfk_pre, 1, in, 1, out);
  ws->have_metric = 0;
#if PBF_WEIGHT
  { casadi_int j;
    pbf_metric(ws);
    for (j = 0; j < PBF_NVEL; ++j) for (i = 0; i <= j; ++i) ws->LM[i + j * PBF_NVEL] = ws->M[i + j * PBF_NVEL];
    (void)pbf_chol(ws->LM, PBF_NVEL); }
#elif PBF_METRIC > 0 && PBF_DAMP
  if (opt[PBF_OPT_METRIC] != 0) {
    pbf_metric(ws);
    ws->have_metric = 1;
  }
#endif
  PBF_TI(c, PBF_I_HAVEM) = ws->have_metric;
  PBF_TI(c, PBF_I_FLIP) = 0;
  PBF_TI(c, PBF_I_IT) = 0;
  PBF_TI(c, PBF_I_NEV) = 1;
  pbf_eval_fgh(ws, x, &f, g, H, Hg);
  if (!pbf_finite(f) || !pbf_all_finite(g, n)) {
    PBF_TI(c, PBF_I_CONV) = 0; PBF_TI(c, PBF_I_REASON) = PBF_R_NON_FINITE;
    pbf_iter_solved(ws, c, d, f, x, INFINITY);
    return 1;
  }
  if (pbf_small_grad(opt, f, g)) {
    pbf_verdict(opt, f, PBF_R_GRADIENT, &reason, &conv);
    PBF_TI(c, PBF_I_CONV) = conv; PBF_TI(c, PBF_I_REASON) = reason;
    pbf_iter_solved(ws, c, d, f, x, pbf_norm_inf(g, n));
    return 1;
  }
  Hlast = PBF_HYBRID ? Hg : H;
  PBF_TI(c, PBF_I_MARQ) = !(ws->have_metric);
  if (PBF_TI(c, PBF_I_MARQ)) {
    casadi_real dmax = 0, fl;
    for (i = 0; i < n; ++i) { D[i] = fabs(Hlast[i + i * n]); if (i == 0 || D[i] > dmax) dmax = D[i]; }
    if (n == 0) dmax = 1.0;
    fl = 1e-12 * (dmax > 1e-300 ? dmax : 1e-300);
    for (i = 0; i < n; ++i) if (!(D[i] >= fl)) D[i] = fl;
  }
  mu = opt[PBF_OPT_LAMBDA0];
  PBF_TR(c, PBF_Q_F) = f; PBF_TR(c, PBF_Q_MU) = mu; PBF_TR(c, PBF_Q_NU) = 2.0; PBF_TR(c, PBF_Q_FREF) = f;
  PBF_TI(c, PBF_I_ITREF) = 0; PBF_TI(c, PBF_I_USEGN) = PBF_HYBRID;
  PBF_TI(c, PBF_I_CONV) = conv; PBF_TI(c, PBF_I_REASON) = reason;
  if (!(0 < pbf_opt_int(opt, PBF_OPT_MAX_ITER))) {
    pbf_iter_solved(ws, c, d, f, x, pbf_norm_inf(g, n));
    return 1;
  }
  return 0;
}

/* one iteration of pbf_lm's loop (its body, test for test). Returns 1 where the solve ended. */
static int pbf_iter_lm(const casadi_real* opt, pbf_ws* ws, pbf_tj* c) {
  pbf_bufs b;
  casadi_real *A = ws->A, *d = ws->d, *D = ws->dg, *Hu, *Hlast;
  casadi_real f = PBF_TR(c, PBF_Q_F), fn, mu = PBF_TR(c, PBF_Q_MU), nu = PBF_TR(c, PBF_Q_NU), f_ref = PBF_TR(c, PBF_Q_FREF);
  casadi_real pred, rho, xmax, noise;
  casadi_int i, j, bb, tries, it = PBF_TI(c, PBF_I_IT), it_ref = PBF_TI(c, PBF_I_ITREF), nev = PBF_TI(c, PBF_I_NEV);
  casadi_int stall = pbf_opt_int(opt, PBF_OPT_STALL), max_iter = pbf_opt_int(opt, PBF_OPT_MAX_ITER);
  int conv = (int)PBF_TI(c, PBF_I_CONV), reason = (int)PBF_TI(c, PBF_I_REASON), use_gn = (int)PBF_TI(c, PBF_I_USEGN);
  int marquardt = (int)PBF_TI(c, PBF_I_MARQ), flip = (int)PBF_TI(c, PBF_I_FLIP), ok, floor, small_step, brk = 0;
  const casadi_int n = PBF_NX, nb = PBF_NVEL > 0 ? PBF_NX / PBF_NVEL : 0;
  pbf_bufs_of(ws, flip, &b);
  ++it;
  Hu = use_gn ? b.Hg : b.H;
  for (tries = 0; tries < 200; ++tries) {
    for (j = 0; j < n; ++j) for (i = 0; i <= j; ++i) A[i + j * n] = Hu[i + j * n];
    if (marquardt) {
      for (i = 0; i < n; ++i) A[i + i * n] += mu * D[i];
    } else {
      for (bb = 0; bb < nb; ++bb) for (j = 0; j < PBF_NVEL; ++j) for (i = 0; i <= j; ++i)
        A[(bb * PBF_NVEL + i) + (bb * PBF_NVEL + j) * n] += mu * ws->M[i + j * PBF_NVEL];
    }
    if (!pbf_chol(A, n)) {
      for (i = 0; i < n; ++i) d[i] = b.g[i];
      pbf_chol_solve(A, d, n);
      for (i = 0; i < n; ++i) d[i] = -d[i];
      if (pbf_all_finite(d, n) && pbf_norm_inf(d, n) <= opt[PBF_OPT_MAX_STEP]) break;
    } else if (PBF_HYBRID && !use_gn) {
      use_gn = 1;
      Hu = b.Hg;
      continue;
    }
    mu = mu * 4.0 > 1e-12 ? mu * 4.0 : 1e-12;
  }
  pbf_gemv(Hu, d, ws->t1, n);
  pred = -(pbf_dot(b.g, d, n) + 0.5 * pbf_dot(d, ws->t1, n));
  for (i = 0; i < n; ++i) b.xn[i] = b.x[i] + d[i];
  pbf_eval_fgh(ws, b.xn, &fn, b.gn, b.Hn, b.Hgn);
  ++nev;
  xmax = pbf_norm_inf(b.x, n);
  small_step = pbf_norm_inf(d, n) <= opt[PBF_OPT_XTOL] * (1.0 + xmax);
  ok = pbf_finite(fn) && pbf_all_finite(b.gn, n) && pbf_all_finite(b.Hn, n * n)
       && (!PBF_HYBRID || pbf_all_finite(b.Hgn, n * n));
  rho = (ok && pred > 0) ? (f - fn) / pred : -1.0;
  noise = 10.0 * PBF_EPS * (fabs(f) + fabs(fn));
  floor = ok && pred <= noise && fabs(f - fn) <= noise;
  if (floor && !(rho > 1e-4) && pbf_norm_inf(b.gn, n) < pbf_norm_inf(b.g, n)) rho = 1.0;
  if (rho > 1e-4) {
    casadi_real cc;
    if (PBF_HYBRID) use_gn = (f - fn) >= 0.2 * f;
    flip = !flip;
    pbf_bufs_of(ws, flip, &b);
    Hlast = PBF_HYBRID ? b.Hg : b.H;
    f = fn;
    if (marquardt) for (i = 0; i < n; ++i) { casadi_real a = fabs(Hlast[i + i * n]); if (a > D[i]) D[i] = a; }
    if (rho > 0.25) {
      mu *= opt[PBF_OPT_SHRINK];
    } else {
      cc = 1.0 - pow(2.0 * rho - 1.0, 3.0);
      mu *= (cc > 1.0 / 3.0 ? cc : 1.0 / 3.0);
    }
    if (!(mu >= 1e-15)) mu = 1e-15;
    nu = 2.0;
    if (pbf_small_grad(opt, f, b.g)) { pbf_verdict(opt, f, PBF_R_GRADIENT, &reason, &conv); brk = 1; }
    else if (small_step) { pbf_verdict(opt, f, PBF_R_STEP, &reason, &conv); brk = 1; }
  } else {
    if (floor) { pbf_verdict(opt, f, PBF_R_PRECISION, &reason, &conv); brk = 1; }
    else { mu *= nu; nu *= 2.0; }
  }
  if (!brk) {
    if (f <= 0.1 * f_ref) { f_ref = f; it_ref = it; }
    else if (PBF_KIND == 2 && stall > 0
             && it - it_ref >= (2.0 * f <= opt[PBF_OPT_RTOL] * opt[PBF_OPT_RTOL] && stall > PBF_STALL_AT_FLOOR
                                ? PBF_STALL_AT_FLOOR : stall)) {
      pbf_verdict(opt, f, PBF_R_STALLED, &reason, &conv); reason = PBF_R_STALLED; brk = 1;
    }
  }
  PBF_TR(c, PBF_Q_F) = f; PBF_TR(c, PBF_Q_MU) = mu; PBF_TR(c, PBF_Q_NU) = nu; PBF_TR(c, PBF_Q_FREF) = f_ref;
  PBF_TI(c, PBF_I_IT) = it; PBF_TI(c, PBF_I_ITREF) = it_ref; PBF_TI(c, PBF_I_NEV) = nev;
  PBF_TI(c, PBF_I_USEGN) = use_gn; PBF_TI(c, PBF_I_FLIP) = flip;
  PBF_TI(c, PBF_I_CONV) = conv; PBF_TI(c, PBF_I_REASON) = reason;
  if (brk || !(it < max_iter)) {
    pbf_iter_solved(ws, c, PBF_TI(c, PBF_I_DEPTH), f, b.x, pbf_norm_inf(b.g, n));
    return 1;
  }
  return 0;
}

/* a frame's solve has ended: halve (push its first half step) or end the frame, and through it the frames
   below it on the stack (pbf_step_rec after its recursive calls), and record a step of the rollout when the
   top frame ends (pbf_rollout_ws's loop body). */
static void pbf_iter_after_solve(const casadi_real* opt, pbf_ws* ws, pbf_tj* c, casadi_real t0, casadi_real dt0,
                                 casadi_int steps, casadi_real* S, casadi_int* ST, casadi_real* GN,
                                 casadi_int* status, casadi_int* taken) {
  casadi_int d = PBF_TI(c, PBF_I_DEPTH), j;
  if (!PBF_LI(c, d, PBF_L_ST + PBF_ST_CONV) && !(d >= pbf_opt_int(opt, PBF_OPT_MAX_HALVINGS))
      && !(d + 1 >= ws->nlev)) {
    casadi_real dt = PBF_LR(c, d, PBF_QL_DT), half = dt / 2.0;
    casadi_real* sh = ws->lev + d * 4 * PBF_NS;
    pbf_restart(ws, pbf_frame_in(ws, c, d), dt, 0.5, sh, sh + 3 * PBF_NS);
    PBF_LI(c, d + 1, PBF_L_CHILD) = 1;
    PBF_LR(c, d + 1, PBF_QL_T) = PBF_LR(c, d, PBF_QL_T);
    PBF_LR(c, d + 1, PBF_QL_DT) = half;
    PBF_TI(c, PBF_I_DEPTH) = d + 1;
    PBF_TI(c, PBF_I_PHASE) = PBF_PH_SETUP;
    return;
  }
  while (d > 0) {                     /* frame d is complete */
    casadi_int p = d - 1;
    if (PBF_LI(c, d, PBF_L_CHILD) == 1) {          /* first half done: the second from its end */
      casadi_real half = PBF_LR(c, d, PBF_QL_DT);
      for (j = 0; j < PBF_NST; ++j) PBF_LI(c, p, PBF_L_ST1 + j) = PBF_LI(c, d, PBF_L_ST + j);
      for (j = 0; j < PBF_NSR; ++j) PBF_LR(c, p, PBF_QL_G1 + j) = PBF_LR(c, d, PBF_QL_G + j);
      PBF_LI(c, d, PBF_L_CHILD) = 2;
      PBF_LR(c, d, PBF_QL_T) = PBF_LR(c, p, PBF_QL_T) + half;
      PBF_TI(c, PBF_I_PHASE) = PBF_PH_SETUP;
      return;
    }
    {                                               /* both halves done: the parent's total */
      casadi_real half = PBF_LR(c, d, PBF_QL_DT), *s2 = pbf_frame_out(ws, c, d);
      casadi_int c1, c2;
      PBF_LI(c, p, PBF_L_ST + PBF_ST_ITER) += PBF_LI(c, p, PBF_L_ST1 + PBF_ST_ITER) + PBF_LI(c, d, PBF_L_ST + PBF_ST_ITER);
      PBF_LI(c, p, PBF_L_ST + PBF_ST_EVALS) += PBF_LI(c, p, PBF_L_ST1 + PBF_ST_EVALS) + PBF_LI(c, d, PBF_L_ST + PBF_ST_EVALS);
      PBF_LI(c, p, PBF_L_ST + PBF_ST_HALV) = 1 + PBF_LI(c, p, PBF_L_ST1 + PBF_ST_HALV) + PBF_LI(c, d, PBF_L_ST + PBF_ST_HALV);
      PBF_LI(c, p, PBF_L_ST + PBF_ST_DEPTH) = 1 + PBF_MAXI(PBF_LI(c, p, PBF_L_ST1 + PBF_ST_DEPTH),
                                                          PBF_LI(c, d, PBF_L_ST + PBF_ST_DEPTH));
      c1 = PBF_LI(c, p, PBF_L_ST1 + PBF_ST_CONV); c2 = PBF_LI(c, d, PBF_L_ST + PBF_ST_CONV);
      PBF_LI(c, p, PBF_L_ST + PBF_ST_CONV) = c1 && c2;
      PBF_LI(c, p, PBF_L_ST + PBF_ST_REASON) = c2 ? PBF_LI(c, p, PBF_L_ST1 + PBF_ST_REASON)
                                                  : PBF_LI(c, d, PBF_L_ST + PBF_ST_REASON);
      for (j = 0; j < PBF_NSR; ++j) {
        casadi_real g1 = PBF_LR(c, p, PBF_QL_G1 + j), g2 = PBF_LR(c, d, PBF_QL_G + j), gm = 0.0;
        if (g1 > gm) gm = g1;
        if (g2 > gm) gm = g2;
        PBF_LR(c, p, PBF_QL_G + j) = gm;
      }
      pbf_restart(ws, s2, half, 2.0, pbf_frame_out(ws, c, p), s2 + PBF_NS);
      d = p;
      PBF_TI(c, PBF_I_DEPTH) = d;
    }
  }
  {                                   /* the top frame is complete: step k of the rollout */
    casadi_int k = PBF_TI(c, PBF_I_K), st[PBF_NST];
    casadi_real *sn = ws->sn, t, vmax = opt[PBF_OPT_MAX_SPEED];
    int bad;
    for (j = 0; j < PBF_NST; ++j) ST[k * PBF_NST + j] = st[j] = PBF_LI(c, 0, PBF_L_ST + j);
    for (j = 0; j < PBF_NSR; ++j) GN[k * PBF_NSR + j] = PBF_LR(c, 0, PBF_QL_G + j);
    if (pbf_stops(opt, st)) { *status = PBF_FAILED; *taken = k; PBF_TI(c, PBF_I_PHASE) = PBF_PH_DONE; return; }
    t = t0 + (casadi_real)(k + 1) * dt0;
    bad = !pbf_all_finite(sn, PBF_NQ + PBF_NVEL) || (PBF_NVEL > 0 && pbf_norm_inf(sn + PBF_NQ, PBF_NVEL) > vmax);
    if (bad) { *status = PBF_DIVERGED; *taken = k; PBF_TI(c, PBF_I_PHASE) = PBF_PH_DONE; return; }
    pbf_copy(sn, S + (k + 1) * PBF_NS, PBF_NS);
    pbf_copy(sn, ws->s, PBF_NS);
    PBF_TI(c, PBF_I_K) = k + 1;
    if (k + 1 >= steps) { *status = PBF_DONE; *taken = steps; PBF_TI(c, PBF_I_PHASE) = PBF_PH_DONE; return; }
    PBF_LI(c, 0, PBF_L_CHILD) = 0;
    PBF_LR(c, 0, PBF_QL_T) = t;
    PBF_LR(c, 0, PBF_QL_DT) = dt0;
    PBF_TI(c, PBF_I_PHASE) = PBF_PH_SETUP;
  }
}

/* One launch for trajectory i of M: the bookkeeping up to its next LM iteration, that iteration, and the
   bookkeeping after it; a trajectory not yet done counts itself in *active. The arguments are
   pbf_rollout_all's plus the controller buffers I (n_int x M) and R (n_real x M) of pbf_iter_sizes, zeroed
   before the first launch (phase 0: the initial state). */
static void pbf_iter_one(casadi_int i, casadi_int M, const casadi_real* opt, const casadi_real* Q0,
                         const casadi_real* QD0, casadi_real t0, casadi_real dt, casadi_int steps,
                         const casadi_real* U, casadi_real* S, casadi_int* ST, casadi_real* GN, casadi_int* status,
                         casadi_int* taken, casadi_real* W, casadi_int* IW, casadi_int nw, casadi_int niw,
                         casadi_int* I, casadi_real* R, casadi_int* active) {
  pbf_ws ws;
  pbf_tj cv, *c = &cv;
  casadi_real zero_u[PBF_NU > 0 ? PBF_NU : 1] = {0};
  const casadi_real* u = U ? U + i * PBF_NU : zero_u;
  casadi_real *Si = S + i * (steps + 1) * PBF_NS, *GNi = GN + i * steps * PBF_NSR;
  casadi_int* STi = ST + i * steps * PBF_NST;
  int iterated = 0;
  c->M = M; c->i = i; c->I = I; c->R = R;
  if (PBF_TI(c, PBF_I_PHASE) == PBF_PH_DONE) return;
  pbf_ws_init(opt, W + i * nw, IW + i * niw, &ws);
  ws.have_metric = (int)PBF_TI(c, PBF_I_HAVEM);
  for (;;) {
    casadi_int ph = PBF_TI(c, PBF_I_PHASE);
    if (ph == PBF_PH_DONE) break;
    if (ph == PBF_PH_INIT) {
      pbf_init_state(&ws, Q0 + i * PBF_NQ, QD0 + i * PBF_NVEL, t0, dt, u, ws.s);
      pbf_copy(ws.s, Si, PBF_NS);
      status[i] = PBF_DONE;
      taken[i] = 0;
      PBF_TI(c, PBF_I_K) = 0;
      PBF_TI(c, PBF_I_DEPTH) = 0;
      PBF_LI(c, 0, PBF_L_CHILD) = 0;
      PBF_LR(c, 0, PBF_QL_T) = t0;
      PBF_LR(c, 0, PBF_QL_DT) = dt;
      PBF_TI(c, PBF_I_PHASE) = steps > 0 ? PBF_PH_SETUP : PBF_PH_DONE;
    } else if (ph == PBF_PH_SETUP) {
      if (pbf_iter_setup(opt, &ws, c, u)) pbf_iter_after_solve(opt, &ws, c, t0, dt, steps, Si, STi, GNi, status + i, taken + i);
      else PBF_TI(c, PBF_I_PHASE) = PBF_PH_ITER;
    } else {
      if (iterated) break;
      iterated = 1;
      if (pbf_iter_lm(opt, &ws, c)) pbf_iter_after_solve(opt, &ws, c, t0, dt, steps, Si, STi, GNi, status + i, taken + i);
    }
  }
  if (PBF_TI(c, PBF_I_PHASE) != PBF_PH_DONE) PBF_COUNT(active);
}

#define PBF_ITER_ARGS casadi_int M, const casadi_real* opt, const casadi_real* Q0, const casadi_real* QD0,           \
    casadi_real t0, casadi_real dt, casadi_int steps, const casadi_real* U, casadi_real* S, casadi_int* ST,           \
    casadi_real* GN, casadi_int* status, casadi_int* taken, casadi_real* W, casadi_int* IW, casadi_int nw,          \
    casadi_int niw, casadi_int* I, casadi_real* R, casadi_int* active
#define PBF_ITER_PASS(i) (i), M, opt, Q0, QD0, t0, dt, steps, U, S, ST, GN, status, taken, W, IW, nw, niw, I, R, active

#ifdef __CUDACC__
/* one launch on the device: one thread per trajectory */
extern "C" __global__ void pbf_iter_kernel(PBF_ITER_ARGS) {
  casadi_int i = (casadi_int)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < M) pbf_iter_one(PBF_ITER_PASS(i));
}
#endif

/* one launch on the host: the same per-trajectory step for i = 0 .. M-1 (*active is not reset here) */
PBF_EXPORT void pbf_iter_launch(PBF_ITER_ARGS) {
  casadi_int i;
  for (i = 0; i < M; ++i) pbf_iter_one(PBF_ITER_PASS(i));
}
