# Sourced by bench/umem/run-*-on-gpu.sh: $out made, the kernels loaded up front, and the machine's
# facts (GPU, driver, memory, CPUs) written to $out/machine.txt and shown.
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
