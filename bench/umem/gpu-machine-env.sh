# Sourced by bench/umem/run-*-on-gpu.sh: $out made, the kernels loaded up front, and the machine's
# facts (GPU, driver, memory, CPUs) written to $out/machine.txt and shown; test_builds for the A/B scripts.
out=${OUT:-/tmp/umem-out}
mkdir -p "$out"
export CUDA_MODULE_LOADING=EAGER  # kernels loaded up front, not inside the first timed launch
{
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,pcie.link.gen.current,pcie.link.width.current --format=csv
    free -g | head -2
    nproc
} > "$out/machine.txt" 2>&1
cat "$out/machine.txt"

# The GPU tests of each build named (build-umem/<v>/gpu-umem): output in $out/tests-<v>.txt, one line each here.
test_builds() {
    local v t0
    for v in "$@"; do
        t0=$SECONDS
        timeout 180 build-umem/$v/gpu-umem > "$out/tests-$v.txt" 2>&1
        echo "tests $v: rc=$? in $((SECONDS - t0)) s; $(grep -E 'passed|failed' "$out/tests-$v.txt" | tail -1)"
    done
}
