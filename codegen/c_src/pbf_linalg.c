/* pbframework solver driver, part 2 of 4: the small dense linear algebra (dot products, Cholesky).
 * pbframework/linalg.py repeats these sums term for term (see pbf_dot). */

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
