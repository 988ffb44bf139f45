/* pbframework solver driver, part 4 of 4: steps and rollouts (the start state, restarts for a new step
 * size, halving retries, the failure policy), the exported entry points and a timing helper. */

/* the unknowns x of the step from state s at t of size dt (p = params(s, t, dt, u) left in ws->p, x from
   guess(p)); gnorm: PBF_NSR reals */
static void pbf_solve_at(const casadi_real* opt, pbf_ws* ws, const casadi_real* s, casadi_real t, casadi_real dt,
                         const casadi_real* u, casadi_real* x, casadi_int* st, casadi_real* gnorm) {
  const casadi_real* in[4]; casadi_real* out[1];
  casadi_real tt = t, hh = dt;
  in[0] = s; in[1] = &tt; in[2] = &hh; in[3] = u; out[0] = ws->p;
  PBF_KCALL(pbfk_params, 4, in, 1, out);
#if PBF_NX > 0
  in[0] = ws->p; out[0] = x;
  PBF_KCALL(pbfk_guess, 1, in, 1, out);
#else
  x[0] = 0;
#endif
#if PBF_KIND == 2
  gnorm[PBF_SR_RESIDUAL] = sqrt(2 * pbf_solve_ws(opt, ws, x, st, gnorm));   /* f = ||W r||^2 / 2 */
#else
  pbf_solve_ws(opt, ws, x, st, gnorm);
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

/* One step of the Simulator from state s at time t (inputs u; null: zeros); gnorm: PBF_NSR
   reals. Returns 1 where the step did not converge and the failure policy is not continue. */
PBF_EXPORT int pbf_step(const casadi_real* opt, const casadi_real* s, casadi_real t, casadi_real dt,
                        const casadi_real* u, casadi_real* s_next, casadi_int* st, casadi_real* gnorm,
                        casadi_real* w, casadi_int* iw) {
  pbf_ws ws;
  static const casadi_real zero_u[PBF_NU > 0 ? PBF_NU : 1] = {0};   /* u null: zeros, NU of them */
  pbf_ws_init(opt, w, iw, &ws);
  pbf_step_rec(opt, &ws, s, t, dt, u ? u : zero_u, s_next, st, gnorm, 0);
  return pbf_stops(opt, st);
}

/* The integrator's first state from (q0, qd0) at t0 for timestep dt. */
PBF_EXPORT int pbf_init(const casadi_real* opt, const casadi_real* q0, const casadi_real* qd0, casadi_real t0,
                        casadi_real dt, const casadi_real* u, casadi_real* s0, casadi_real* w, casadi_int* iw) {
  pbf_ws ws;
  static const casadi_real zero_u[PBF_NU > 0 ? PBF_NU : 1] = {0};   /* u null: zeros, NU of them */
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
    bad = !pbf_all_finite(sn, PBF_NQ + PBF_NVEL) || (PBF_NVEL > 0 && pbf_norm_inf(sn + PBF_NQ, PBF_NVEL) > vmax);
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
  static const casadi_real zero_u[PBF_NU > 0 ? PBF_NU : 1] = {0};   /* u null: zeros, NU of them */
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
  static const casadi_real zero_u[PBF_NU > 0 ? PBF_NU : 1] = {0};   /* u null: zeros, NU of them */
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

/* Sizes: nq, nx, ns, np, nu, nr, nz, solver, derivative mode, metric mode, directions, real size, nv. */
PBF_EXPORT void pbf_sizes(casadi_int* out) {
  out[0] = PBF_NQ; out[1] = PBF_NX; out[2] = PBF_NS; out[3] = PBF_NP; out[4] = PBF_NU; out[5] = PBF_NR;
  out[6] = PBF_NZ; out[7] = PBF_SOLVER; out[8] = PBF_HESS; out[9] = PBF_METRIC; out[10] = PBF_BD;
  out[11] = (casadi_int)sizeof(casadi_real); out[12] = PBF_NVEL;
}

#ifdef PBF_POP_OPTIONS
#pragma GCC pop_options
#endif
