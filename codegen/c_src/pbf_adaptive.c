/* pbframework adaptive step-size control in C: pbframework.adaptive.rollout_adaptive, decision for decision.
 *
 * Included after the driver (pbf_rollout.c) when the step problem has a local error estimate and dense output (kernels
 * pbfk_err (x, p) -> e of NQ and pbfk_dense (x, p, theta) -> [q; qd]; PBF_HAVE_ADAPTIVE). Portable C99, no
 * allocation, no host calls, like the driver.
 *
 * One call advances the rollout until the output row jmax is written (or the run ends, or the caller's
 * record of accepted steps is full), so a host can run it in pieces (progress bar, energy test between
 * pieces) with results identical to one call: everything the loop carries between steps lives in the
 * caller's array carry (PBF_NAC reals, then the state, NS reals).
 */

/* adaptive options (casadi_real aopt[PBF_NAOPT]): pbframework.adaptive.AdaptiveOptions, atol and h_max
   resolved, and the error estimate's order */
enum {
  PBF_AOPT_RTOL = 0, PBF_AOPT_ATOL, PBF_AOPT_H_MIN, PBF_AOPT_H_MAX, PBF_AOPT_SAFETY, PBF_AOPT_MIN_FACTOR,
  PBF_AOPT_MAX_FACTOR, PBF_AOPT_ORDER, PBF_AOPT_FIRST_STEP, PBF_NAOPT
};
/* the loop's carried values (casadi_real carry[PBF_NAC + PBF_NS]): time, next step to try, the step the
   state is expressed for, the last accepted error, whether a step was accepted yet, the counters of the
   current output interval, the time and step of the failure (status PBF_FAILED / PBF_DIVERGED); the state
   follows at PBF_AC_STATE */
enum {
  PBF_AC_T = 0, PBF_AC_H, PBF_AC_H_STATE, PBF_AC_ERR_PREV, PBF_AC_STARTED, PBF_AC_ITER, PBF_AC_HALV,
  PBF_AC_EVALS, PBF_AC_RESIDUAL, PBF_AC_CONV, PBF_AC_T_END, PBF_AC_H_END, PBF_AC_STATE, PBF_NAC = PBF_AC_STATE
};

static casadi_real pbf_fmin(casadi_real a, casadi_real b) { return a < b ? a : b; }
static casadi_real pbf_fmax(casadi_real a, casadi_real b) { return a > b ? a : b; }

/* a solve at step h from the carried state (or, before the first accepted step, from (q0, qd0)): the state
   sh it starts from, the unknowns x and the parameters (in ws->p) */
static void pbf_adaptive_solve(const casadi_real* opt, pbf_ws* ws, const casadi_real* carry,
                               const casadi_real* q0, const casadi_real* qd0, casadi_real t0, casadi_real t,
                               casadi_real h, const casadi_real* u, casadi_real* sh, casadi_real* x,
                               casadi_int* st, casadi_real* gnorm) {
  if (carry[PBF_AC_STARTED] == 0) pbf_init_state(ws, q0, qd0, t0, h, u, sh);
  else if (h == carry[PBF_AC_H_STATE]) pbf_copy(carry + PBF_AC_STATE, sh, PBF_NS);
  else pbf_restart(ws, carry + PBF_AC_STATE, carry[PBF_AC_H_STATE], h / carry[PBF_AC_H_STATE], sh, ws->sn);
  pbf_solve_at(opt, ws, sh, t, h, u, x, st, gnorm);
}

/* The carried values of an adaptive rollout that starts at t0 with output interval dt: the first step is
   aopt's first_step (dt where it is not positive), at most h_max. */
PBF_EXPORT void pbf_adaptive_begin(const casadi_real* aopt, casadi_real t0, casadi_real dt, casadi_real* carry) {
  casadi_int i;
  casadi_real first = aopt[PBF_AOPT_FIRST_STEP] > 0 ? aopt[PBF_AOPT_FIRST_STEP] : dt;
  for (i = 0; i < PBF_NAC + PBF_NS; ++i) carry[i] = 0;
  carry[PBF_AC_T] = t0;
  carry[PBF_AC_H] = pbf_fmin(first, aopt[PBF_AOPT_H_MAX]);
  carry[PBF_AC_ERR_PREV] = 1.0;
  carry[PBF_AC_CONV] = 1.0;
}

/* The adaptive rollout from (q0, qd0) at t0 with output every dt for steps rows (row j at t0 + (j + 1) dt),
   continuing from carry (from pbf_adaptive_begin on the first call). Writes rows j0, j0 + 1, ... as Y[(j - j0) * (NQ + NVEL)] ([q; qd]) with their
   interval's statistics st[(j - j0) * PBF_NST], gn[(j - j0) * PBF_NSR], and every accepted step's start
   time and size to hist (2 reals each, at most hcap, counted in *nhist). Stops once a row j >= jmax - 1
   is written (Y needs room for the rows of one more step: jmax - j0 + h_max / dt + 1), when hist is full,
   or when the run ends: *status = PBF_DONE (all rows written or a pause: the return value says which),
   PBF_DIVERGED (the accepted step from carry[PBF_AC_T_END] - carry[PBF_AC_H_END] has a state not finite
   or a speed above max_speed) or PBF_FAILED (a step unconverged at h_min under the stop or raise policy;
   its statistics in the row after the last written). Returns the next row to write. */
PBF_EXPORT casadi_int pbf_rollout_adaptive(const casadi_real* opt, const casadi_real* aopt, const casadi_real* q0,
                                           const casadi_real* qd0, casadi_real t0, casadi_real dt, casadi_int steps,
                                           casadi_int j0, casadi_int jmax, const casadi_real* u, casadi_real* carry,
                                           casadi_real* Y, casadi_int* st, casadi_real* gn, casadi_real* hist,
                                           casadi_int hcap, casadi_int* nhist, casadi_int* status, casadi_real* w,
                                           casadi_int* iw) {
  pbf_ws wsv, *ws = &wsv;
  static const casadi_real zero_u[PBF_NU > 0 ? PBF_NU : 1] = {0};   /* u null: zeros, NU of them */
  const casadi_real rtol = aopt[PBF_AOPT_RTOL], atol = aopt[PBF_AOPT_ATOL], h_min = aopt[PBF_AOPT_H_MIN];
  const casadi_real h_max = aopt[PBF_AOPT_H_MAX], safety = aopt[PBF_AOPT_SAFETY];
  const casadi_real min_factor = aopt[PBF_AOPT_MIN_FACTOR], max_factor = aopt[PBF_AOPT_MAX_FACTOR];
  const casadi_real k_err = aopt[PBF_AOPT_ORDER], vmax = opt[PBF_OPT_MAX_SPEED];
  const casadi_real t_end = t0 + (casadi_real)steps * dt, t_end_tol = 1e-12 * pbf_fmax(1.0, fabs(t_end));
  const int keep_going = (int)opt[PBF_OPT_ON_FAILURE] == PBF_FAIL_CONTINUE;
  casadi_real x[PBF_MX], gnorm[PBF_NSR];
  casadi_real *sh, *s_new, *e, *acc = carry;
  casadi_int sst[PBF_NST], j = j0, i;
  if (!u) u = zero_u;
  pbf_ws_init(opt, w, iw, ws);
  sh = ws->s; s_new = ws->lev; e = ws->lev + PBF_NS;       /* halving levels are unused here */
  *status = PBF_DONE;
  while (j < steps) {
    casadi_real t = carry[PBF_AC_T], h = carry[PBF_AC_H], err = INFINITY, t_new, tol_new;
    int conv, at_floor;
    if (j >= jmax || *nhist >= hcap) return j;            /* a pause: the caller continues from carry */
    h = pbf_fmin(h, t_end - t);
    if (t + h > t_end - t_end_tol) h = t_end - t;          /* land on the end */
    pbf_adaptive_solve(opt, ws, carry, q0, qd0, t0, t, h, u, sh, x, sst, gnorm);
    acc[PBF_AC_ITER] += (casadi_real)sst[PBF_ST_ITER];
    acc[PBF_AC_EVALS] += (casadi_real)sst[PBF_ST_EVALS];
    conv = (int)sst[PBF_ST_CONV];
    { const casadi_real* in[2]; casadi_real* out[1];
      in[0] = x; in[1] = ws->p; out[0] = s_new;
      PBF_KCALL(pbfk_advance, 2, in, 1, out);
      if (conv) {
        in[0] = x; in[1] = ws->p; out[0] = e;
        PBF_KCALL(pbfk_err, 2, in, 1, out);
        for (i = 0; i < PBF_NQ; ++i) {
          casadi_real a = fabs(sh[i]), b = fabs(s_new[i]);
          e[i] = e[i] / (atol + rtol * (a > b ? a : b));
        }
        err = PBF_NQ > 0 ? sqrt(pbf_dot(e, e, PBF_NQ) / (casadi_real)PBF_NQ) : 0.0;
      } }
    at_floor = h <= h_min;
    if (!conv && at_floor && keep_going) { acc[PBF_AC_CONV] = 0; err = 1.0; }
    if (!(err <= 1.0)) {                                   /* rejected (nan included) */
      casadi_real factor = (!conv || !pbf_finite(err)) ? 0.25
                           : pbf_fmax(min_factor, safety * pow(err, -1.0 / k_err));
      acc[PBF_AC_HALV] += 1;
      if (at_floor) {                                      /* unconverged at h_min: the policy stops here */
        casadi_int* r = st + (j - j0) * PBF_NST;
        r[PBF_ST_ITER] = (casadi_int)acc[PBF_AC_ITER]; r[PBF_ST_CONV] = 0; r[PBF_ST_REASON] = sst[PBF_ST_REASON];
        r[PBF_ST_EVALS] = (casadi_int)acc[PBF_AC_EVALS]; r[PBF_ST_HALV] = (casadi_int)acc[PBF_AC_HALV];
        r[PBF_ST_DEPTH] = 0;
        gn[(j - j0) * PBF_NSR + PBF_SR_GRAD] = gnorm[PBF_SR_GRAD];
        gn[(j - j0) * PBF_NSR + PBF_SR_RESIDUAL] = gnorm[PBF_SR_RESIDUAL];
        carry[PBF_AC_T_END] = t; carry[PBF_AC_H_END] = h;
        *status = PBF_FAILED;
        return j;
      }
      carry[PBF_AC_H] = pbf_fmax(h * factor, h_min);
      continue;
    }
    /* accepted */
    if (!pbf_all_finite(s_new, PBF_NQ + PBF_NVEL) || (PBF_NVEL > 0 && pbf_norm_inf(s_new + PBF_NQ, PBF_NVEL) > vmax)) {
      carry[PBF_AC_T_END] = t + h; carry[PBF_AC_H_END] = h;
      *status = PBF_DIVERGED;
      return j;
    }
    if (gnorm[PBF_SR_RESIDUAL] > acc[PBF_AC_RESIDUAL]) acc[PBF_AC_RESIDUAL] = gnorm[PBF_SR_RESIDUAL];
    hist[2 * *nhist] = t; hist[2 * *nhist + 1] = h; ++*nhist;
    t_new = t + h;
    tol_new = 1e-12 * pbf_fmax(1.0, fabs(t_new));
    while (j < steps) {                                    /* dense output on the grid points in (t, t + h] */
      casadi_real tj = t0 + dt * (casadi_real)(j + 1), theta;
      const casadi_real* in[3]; casadi_real* out[1];
      casadi_int* r = st + (j - j0) * PBF_NST;
      if (!(tj <= t_new + tol_new)) break;
      theta = fabs(tj - t_new) <= tol_new ? 1.0 : (tj - t) / h;
      in[0] = x; in[1] = ws->p; in[2] = &theta; out[0] = Y + (j - j0) * (PBF_NQ + PBF_NVEL);
      PBF_KCALL(pbfk_dense, 3, in, 1, out);
      r[PBF_ST_ITER] = (casadi_int)acc[PBF_AC_ITER]; r[PBF_ST_CONV] = acc[PBF_AC_CONV] != 0;
      r[PBF_ST_REASON] = sst[PBF_ST_REASON]; r[PBF_ST_EVALS] = (casadi_int)acc[PBF_AC_EVALS];
      r[PBF_ST_HALV] = (casadi_int)acc[PBF_AC_HALV]; r[PBF_ST_DEPTH] = 0;
      gn[(j - j0) * PBF_NSR + PBF_SR_GRAD] = gnorm[PBF_SR_GRAD];
      gn[(j - j0) * PBF_NSR + PBF_SR_RESIDUAL] = acc[PBF_AC_RESIDUAL];
      acc[PBF_AC_ITER] = acc[PBF_AC_HALV] = acc[PBF_AC_EVALS] = acc[PBF_AC_RESIDUAL] = 0;
      acc[PBF_AC_CONV] = 1;
      ++j;
    }
    pbf_copy(s_new, carry + PBF_AC_STATE, PBF_NS);
    carry[PBF_AC_H_STATE] = h; carry[PBF_AC_T] = t_new; carry[PBF_AC_STARTED] = 1;
    { casadi_real factor = safety * pow(pbf_fmax(err, 1e-10), -0.7 / k_err) * pow(carry[PBF_AC_ERR_PREV], 0.4 / k_err);
      carry[PBF_AC_H] = pbf_fmin(h * pbf_fmin(max_factor, pbf_fmax(min_factor, factor)), h_max); }
    carry[PBF_AC_ERR_PREV] = pbf_fmax(err, 1e-4);
  }
  return j;
}
