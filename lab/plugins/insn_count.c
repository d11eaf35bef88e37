/*
 * insn_count: a QEMU TCG plugin that counts the guest instructions each vCPU executes (user and kernel,
 * interrupts included; a halted vCPU executes none) and lets the guest read every vCPU's count at any
 * moment. `lab/lab run --count-instructions` loads it (docs/lab.md, "Counting guest instructions").
 *
 * Counting: a callback per translation block entered adds the block's instruction count to the vCPU that
 * runs it, so a block that an exception cuts short counts whole. Which vCPU that is comes from QEMU's own
 * `current_cpu` (exported by qemu-system-x86_64; matched against qemu_get_cpu(i)), not from the index QEMU
 * passes: QEMU 10.0's single-threaded TCG (the lab's) bakes the index of the vCPU that translated a block
 * into it, though every vCPU runs the block (accel/tcg/plugin-gen.c, gen_cpu_index), so counts would land
 * on the wrong vCPU; and its inline ops write that baked index into a TCG constant, which corrupted the
 * guest (the kernel crashed early in every boot with a scoreboard inline add).
 * Reading: the guest executes a marker, a 7-byte NOP no compiler emits, `nopl 0x??696462(%rax)` (bytes 0f 1f 80
 * 62 64 69 OP; bench/nic/insn_count.hpp). OP 'c' (snapshot), with a tag of the guest's choice in RAX: the plugin
 * appends one line to the log file (argument log=PATH, shared with the guest):
 *   seq=S vcpu=V tag=T counts=C0,C1,... b0=X0,X1,... b1=Y0,Y1,...
 * S numbers the snapshots from 1, V is the vCPU that executed the marker, Ci vCPU i's count so far, Xi and Yi
 * its two buckets. The line is written before the marker's vCPU runs its next instruction, so a guest reading
 * the log after a marker finds it there. OP 's' (start) and '0', '1' (add): per vCPU, no log, no registers:
 * 's' notes the count, '0' or '1' adds what ran since the last 's' to bucket 0 or 1 (a receive loop puts the
 * polls that found frames in one bucket and the empty ones in the other). A marker's vCPU is counted exactly to
 * the marker: the rest of its block, already added at the block's entry, is taken off.
 * probe=on: print the API versions and refuse to load (the lab's build check, against the binary).
 */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <inttypes.h>
#include <qemu-plugin.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

/* QEMU's own: the vCPU this thread runs now, and the vCPU of an index (weak: checked at install) */
extern __thread void* current_cpu __attribute__((weak, tls_model("initial-exec")));
extern void* qemu_get_cpu(int index) __attribute__((weak));

#define MAX_VCPUS 64
static const uint8_t marker[6] = {0x0f, 0x1f, 0x80, 'b', 'd', 'i'}; /* then the operation */
enum { OP_SNAPSHOT = 'c', OP_START = 's', OP_ADD0 = '0', OP_ADD1 = '1' };

static void* cpus[MAX_VCPUS]; /* qemu_get_cpu(i), filled as vCPUs appear */
static uint64_t counts[MAX_VCPUS];
static uint64_t started[MAX_VCPUS], buckets[2][MAX_VCPUS];
static uint64_t unattributed; /* blocks run where current_cpu matched no vCPU (never seen) */
static struct qemu_plugin_register* rax;
static int n_vcpus;
static int log_fd = -1;
static uint64_t seq;
static GMutex lock;

static inline int vcpu_now(void) {
    void* cpu = current_cpu;
    for (int i = 0; i < n_vcpus; i++)
        if (cpus[i] == cpu) return i;
    for (int i = 0; i < n_vcpus; i++) { /* a vCPU not started when last looked up */
        cpus[i] = qemu_get_cpu(i);
        if (cpus[i] == cpu) return i;
    }
    return -1;
}

static void tb_exec(unsigned int baked_index, void* n) {
    int v = vcpu_now();
    if (v >= 0)
        counts[v] += (uintptr_t)n; /* one TCG thread (thread=single), or each vCPU its own entry (MTTCG) */
    else
        __atomic_fetch_add(&unattributed, (uintptr_t)n, __ATOMIC_RELAXED);
}

static void vcpu_init(qemu_plugin_id_t id, unsigned int vcpu) {
    if (rax) return;
    GArray* regs = qemu_plugin_get_registers();
    for (guint i = 0; regs && i < regs->len; i++) {
        qemu_plugin_reg_descriptor* r = &g_array_index(regs, qemu_plugin_reg_descriptor, i);
        if (strcmp(r->name, "rax") == 0) rax = r->handle; /* a register number: the same on every vCPU */
    }
    if (regs) g_array_free(regs, TRUE);
}

/* udata of a marker's callback: the instructions after it in its block (already counted at the block's entry) */
static inline uint64_t now_exact(int v, void* after) { return counts[v] - (uintptr_t)after; }

static void start(unsigned int baked_index, void* after) {
    int v = vcpu_now();
    if (v >= 0) started[v] = now_exact(v, after);
}
static void add0(unsigned int baked_index, void* after) {
    int v = vcpu_now();
    if (v >= 0) buckets[0][v] += now_exact(v, after) - started[v];
}
static void add1(unsigned int baked_index, void* after) {
    int v = vcpu_now();
    if (v >= 0) buckets[1][v] += now_exact(v, after) - started[v];
}

static void snapshot(unsigned int baked_index, void* after) {
    uint64_t tag = 0;
    if (rax) {
        GByteArray* buf = g_byte_array_new();
        if (qemu_plugin_read_register(rax, buf) == 8) memcpy(&tag, buf->data, 8);
        g_byte_array_free(buf, TRUE);
    }
    int me = vcpu_now();
    g_mutex_lock(&lock);
    GString* line = g_string_new(NULL);
    g_string_append_printf(line, "seq=%" PRIu64 " vcpu=%d tag=%" PRIu64, ++seq, me, tag);
    for (int field = 0; field < 3; field++) {
        g_string_append(line, field == 0 ? " counts=" : field == 1 ? " b0=" : " b1=");
        for (int i = 0; i < n_vcpus; i++) {
            uint64_t c = field ? buckets[field - 1][i] : i == me ? now_exact(i, after) : counts[i];
            g_string_append_printf(line, "%s%" PRIu64, i ? "," : "", c);
        }
    }
    g_string_append_c(line, '\n');
    if (write(log_fd, line->str, line->len) != (ssize_t)line->len)
        qemu_plugin_outs("insn_count: cannot append to the log\n");
    g_string_free(line, TRUE);
    g_mutex_unlock(&lock);
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb* tb) {
    size_t n = qemu_plugin_tb_n_insns(tb);
    qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_exec, QEMU_PLUGIN_CB_NO_REGS, (void*)(uintptr_t)n);
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn* insn = qemu_plugin_tb_get_insn(tb, i);
        uint8_t bytes[sizeof marker + 1];
        if (qemu_plugin_insn_size(insn) != sizeof bytes ||
            qemu_plugin_insn_data(insn, bytes, sizeof bytes) != sizeof bytes ||
            memcmp(bytes, marker, sizeof marker) != 0)
            continue;
        void* after = (void*)(uintptr_t)(n - i - 1);
        switch (bytes[sizeof marker]) {
            case OP_SNAPSHOT:
                qemu_plugin_register_vcpu_insn_exec_cb(insn, snapshot, QEMU_PLUGIN_CB_R_REGS, after);
                break;
            case OP_START:
                qemu_plugin_register_vcpu_insn_exec_cb(insn, start, QEMU_PLUGIN_CB_NO_REGS, after);
                break;
            case OP_ADD0:
                qemu_plugin_register_vcpu_insn_exec_cb(insn, add0, QEMU_PLUGIN_CB_NO_REGS, after);
                break;
            case OP_ADD1:
                qemu_plugin_register_vcpu_insn_exec_cb(insn, add1, QEMU_PLUGIN_CB_NO_REGS, after);
                break;
        }
    }
}

static void at_exit(qemu_plugin_id_t id, void* p) {
    if (unattributed) {
        char msg[128];
        snprintf(msg, sizeof msg, "insn_count: %" PRIu64 " instructions ran on no known vCPU\n", unattributed);
        qemu_plugin_outs(msg);
    }
    if (log_fd >= 0) close(log_fd);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t* info, int argc, char** argv) {
    const char* log = NULL;
    bool probe = false;
    for (int i = 0; i < argc; i++) {
        if (g_str_has_prefix(argv[i], "log="))
            log = argv[i] + 4;
        else if (!g_str_has_prefix(argv[i], "probe=") || !qemu_plugin_bool_parse("probe", argv[i] + 6, &probe)) {
            fprintf(stderr, "insn_count: unknown argument %s (log=PATH, probe=on)\n", argv[i]);
            return -1;
        }
    }
    bool internals = &current_cpu != NULL && qemu_get_cpu != NULL;
    if (info->version.cur != QEMU_PLUGIN_VERSION || !internals || probe) {
        /* QEMU itself only refuses a plugin newer than it or older than its minimum: ask for the exact
           API of the qemu-plugin.h this was built against (the lab keys its build by QEMU's version) */
        fprintf(stderr, "insn_count: plugin API: QEMU %s offers %d (minimum %d), built against %d%s%s\n",
                info->target_name, info->version.cur, info->version.min, QEMU_PLUGIN_VERSION,
                info->version.cur == QEMU_PLUGIN_VERSION ? "" : ": mismatch, rebuild against this QEMU's header",
                internals ? "" : "; QEMU exports no current_cpu/qemu_get_cpu: cannot attribute blocks to vCPUs");
        return -1;
    }
    if (!info->system_emulation || strcmp(info->target_name, "x86_64") != 0) {
        fprintf(stderr, "insn_count: needs qemu-system-x86_64, not %s\n", info->target_name);
        return -1;
    }
    if (info->system.max_vcpus > MAX_VCPUS) {
        fprintf(stderr, "insn_count: at most %d vCPUs, not %d\n", MAX_VCPUS, info->system.max_vcpus);
        return -1;
    }
    if (!log) {
        fprintf(stderr, "insn_count: needs log=PATH\n");
        return -1;
    }
    log_fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
        fprintf(stderr, "insn_count: cannot open %s: %s\n", log, strerror(errno));
        return -1;
    }
    n_vcpus = info->system.smp_vcpus;
    qemu_plugin_register_vcpu_init_cb(id, vcpu_init);
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
