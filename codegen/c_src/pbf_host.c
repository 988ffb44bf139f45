/* pbframework batched rollouts on host threads (POSIX threads).
 *
 * Host-only: included after the driver (pbf_*.c) in the shared library build, never in the embedded or CUDA
 * export. M independent rollouts are handed out one at a time (an atomic counter) to nthreads workers,
 * each with its own slice of the caller-owned work array; a trajectory's arithmetic does not depend on
 * which thread runs it, so every trajectory equals its single rollout bit for bit.
 */
#include <pthread.h>

typedef struct {
  const casadi_real *opt, *q0, *qd0, *u;
  casadi_real t0, dt;
  casadi_int M, steps, nw, niw;
  casadi_real *S, *gn;
  casadi_int *st, *nsteps, *status;
  casadi_real* w;
  casadi_int* iw;
  casadi_int next;
} pbf_batch_job;

typedef struct {
  pbf_batch_job* job;
  casadi_int tid;
} pbf_batch_arg;

static void* pbf_batch_worker(void* argp) {
  pbf_batch_arg* a = (pbf_batch_arg*)argp;
  pbf_batch_job* j = a->job;
  casadi_real* w = j->w + a->tid * j->nw;
  casadi_int* iw = j->iw + a->tid * j->niw;
  const casadi_int nrow = (j->steps + 1) * PBF_NS;
  for (;;) {
    casadi_int m = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
    if (m >= j->M) break;
    j->nsteps[m] = pbf_rollout(j->opt, j->q0 + m * PBF_NQ, j->qd0 + m * PBF_NVEL, j->t0, j->dt, j->steps,
                               j->u ? j->u + m * PBF_NU : 0, j->S + m * nrow,
                               j->st + m * j->steps * PBF_NST, j->gn + m * j->steps * PBF_NSR, j->status + m, w, iw);
  }
  return 0;
}

/* M rollouts (inputs q0: M x NQ, qd0: M x NVEL; u: M x NU or null) on nthreads threads (the calling thread is one of
   them). Outputs are M stacked pbf_rollout outputs (S: M x (steps+1) x NS). w / iw: nthreads blocks of
   pbf_work_size. Returns 0, or the number of threads that could not be started (their share ran on the
   others). */
PBF_EXPORT int pbf_rollout_batch(casadi_int M, casadi_int nthreads, const casadi_real* opt, const casadi_real* q0,
                                 const casadi_real* qd0, casadi_real t0, casadi_real dt, casadi_int steps,
                                 const casadi_real* u, casadi_real* S, casadi_int* st,
                                 casadi_real* gn, casadi_int* nsteps, casadi_int* status,
                                 casadi_real* w, casadi_int* iw) {
  pbf_batch_job job;
  pbf_batch_arg args[256];
  pthread_t th[256];
  int started[256];
  casadi_int nw, niw, k;
  int failed = 0;
  pbf_work_size(opt, &nw, &niw);
  if (nthreads < 1) nthreads = 1;
  if (nthreads > 256) nthreads = 256;
  if (nthreads > M) nthreads = M > 0 ? M : 1;
  job.opt = opt; job.q0 = q0; job.qd0 = qd0; job.u = u; job.t0 = t0; job.dt = dt;
  job.M = M; job.steps = steps; job.nw = nw; job.niw = niw;
  job.S = S; job.gn = gn; job.st = st; job.nsteps = nsteps; job.status = status;
  job.w = w; job.iw = iw; job.next = 0;
  for (k = 0; k < nthreads; ++k) { args[k].job = &job; args[k].tid = k; started[k] = 0; }
  for (k = 1; k < nthreads; ++k) {
    if (pthread_create(&th[k], 0, pbf_batch_worker, &args[k]) == 0) started[k] = 1; else ++failed;
  }
  pbf_batch_worker(&args[0]);
  for (k = 1; k < nthreads; ++k) if (started[k]) pthread_join(th[k], 0);
  return failed;
}
