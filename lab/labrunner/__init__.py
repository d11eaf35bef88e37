"""bardrive's QEMU lab runner, the package behind the `lab/lab` command (docs/lab.md). Its parts:

  presets.py         the machines: devices, topology, the QEMU arguments of each preset
  kernels.py         guest kernels (Debian's, the `full` build) and their cache
  initramfs.py       busybox, modules and the guest's /init
  programs.py        what the guest runs from the host's /usr (lab/guest-programs), CMD located before booting
  network.py         the NICs' wire: QEMU's hub, or (--queues N) multiqueue taps bridged in the run's own namespace
  boot.py            one run: run directory, guest.env, QEMU, output, exit code, cleanup
  guest_requests.py  what a guest test asks of the host while it runs (request-set_link -> QMP)
  windows.py         the host-side check of what devices wrote into the ivshmem windows
  doorbell.py        --doorbell's ivshmem server
  insn_count.py      --count-instructions: builds lab/plugins/insn_count.c (a QEMU TCG plugin) into the cache
  common.py          exit codes, errors, running host tools
  cli.py             the command line

Standard library only: it runs with Debian's /usr/bin/python3 before anything else is installed.
"""
