// spin_pause(): the body of a busy-wait loop (a poll that found nothing, a send the full ring refused).
// On x86 it is PAUSE, which the architecture asks of spin-waits: it frees the core's other hyperthread and
// avoids the memory-order flush on leaving the loop; under QEMU's TCG it ends the vCPU's turn, so a poller
// does not starve the vCPU that would give it work. On Arm it is YIELD; elsewhere nothing.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace bardrive {

inline void spin_pause() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}

}  // namespace bardrive
