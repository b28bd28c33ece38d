/* MKL's CPU dispatch, made vendor-independent (see uaprobe.numerics and uaprobe.mkl_pin).
 *
 * MKL (linked into torch) picks its kernels by asking two of its own functions whether the processor
 * is an Intel one; on any other x86-64 processor it takes other kernels for small row counts and
 * ignores MKL_CBWR. Loaded with RTLD_GLOBAL before torch (and first in LD_PRELOAD for child processes),
 * this library answers "yes" for MKL on every x86-64 machine, so that every machine runs MKL's Intel
 * AVX2 code path under MKL_CBWR=AVX2,STRICT (conditional numerical reproducibility: the same bytes on
 * every such processor and at any thread count). It is never loaded where the AVX2 pins do not apply.
 *
 * Each answer is counted: uaprobe_mkl_dispatch_calls() read after a product through torch proves that
 * MKL asked this library, not another one that defines the same two functions and was found first. */
static unsigned long calls;

int mkl_serv_intel_cpu_true(void) { __atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED); return 1; }
int mkl_serv_intel_cpu(void) { __atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED); return 1; }
unsigned long uaprobe_mkl_dispatch_calls(void) { return __atomic_load_n(&calls, __ATOMIC_RELAXED); }
