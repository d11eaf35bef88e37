# Sourced by bench/umem/run-*-on-gpu.sh: $out made, the kernels loaded up front, and the machine's
# facts (GPU, driver, memory, CPUs) written to $out/machine.txt and shown; test_builds, shown_step,
# umem_bench_step and pack_out for the A/B scripts.
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

# Runs a command into $out/<name>.txt and shows its lines that match `pattern`, zero-copy's left out.
# usage: shown_step name timeout pattern command...
shown_step() {
    local name=$1 t=$2 pattern=$3
    shift 3
    timeout "$t" "$@" > "$out/$name.txt" 2>&1
    echo "== $name (rc=$?)"
    grep -E "$pattern" "$out/$name.txt" | grep -v zero-copy | cut -c1-170
}

# umem-bench at 2 GiB with build-umem/<v>, into $out/umem-<v>.txt; its table rows shown that match `filter`.
# usage: umem_bench_step v pools [filter]
umem_bench_step() {
    timeout 200 "build-umem/$1/umem-bench" --no-uvm --gib 2 --gathers 65536 --bfs-scale 20 --pools "$2" \
        > "$out/umem-$1.txt" 2>&1
    echo "== umem-bench 2 GiB, $1 (rc=$?)"
    grep -E '^\| ' "$out/umem-$1.txt" | grep -v -- '---' | grep -E "${3:-.}" | cut -c1-170 | head -40
}

# The lent machine returns a few files: everything in $out but machine.txt goes into $out/<name>.tgz.
pack_out() {
    tar czf "/tmp/$1.tgz" -C "$out" --exclude machine.txt . && mv "/tmp/$1.tgz" "$out/" &&
        find "$out" -maxdepth 1 -type f ! -name machine.txt ! -name "$1.tgz" -delete
}
