"""Presets: the one definition of each lab machine (docs/lab.md, "Presets") and the QEMU arguments of its devices.
Bus numbers are what SeaBIOS assigns (depth first, in slot order); the guest checks every listed BDF against its
vendor:device before CMD."""

import dataclasses

from . import network

IGB = ('igb', '8086:10c9')        # 82576, QEMU's igb model
E1000E = ('e1000e', '8086:10d3')  # 82574L, QEMU's e1000e model
VIRTIO_NET = ('virtio-net-pci', '1af4:1041')  # modern-only virtio-net (virtio 1.x PCI transport)
# Properties every NIC of a model gets: virtio-net modern-only, and offering VIRTIO_F_ACCESS_PLATFORM so that its
# DMA goes through the emulated IOMMU as a real device's does (without it the device would bypass the IOMMU).
MODEL_PROPS = {VIRTIO_NET[0]: 'disable-legacy=on,iommu_platform=on'}
IVSHMEM = '1af4:1110'             # ivshmem-plain: BAR2 is the window


@dataclasses.dataclass(frozen=True)
class Port:
    """A bridge: pcie-root-port, x3130-upstream (switch upstream), xio3130-downstream, pxb-pcie."""
    id: str
    kind: str
    bus: str
    props: str = ''


@dataclasses.dataclass(frozen=True)
class Nic:
    model: tuple
    bus: str
    bdf: str


@dataclasses.dataclass(frozen=True)
class Window:
    bus: str
    bdf: str
    size_mib: int = 64


@dataclasses.dataclass(frozen=True)
class Preset:
    name: str
    summary: str
    devices: tuple
    classes: tuple  # (bdf, bdf, class) pairs the topology code must report, documented in docs/lab.md
    numa: bool = False

    @property
    def nics(self):
        return [d for d in self.devices if isinstance(d, Nic)]

    @property
    def windows(self):
        return [d for d in self.devices if isinstance(d, Window)]


def _rp(id, bus, chassis, addr=None):
    slot = f',addr={addr}' if addr else ''
    return Port(id, 'pcie-root-port', bus, f'chassis={chassis},slot={chassis}{slot}')


PRESETS = {p.name: p for p in [
    Preset('basic', 'two igb NICs on one hub and one 64 MiB ivshmem window, each behind its own root port',
           (_rp('rp1', 'pcie.0', 1, '0x2'), Nic(IGB, 'rp1', '0000:01:00.0'),
            _rp('rp2', 'pcie.0', 2, '0x3'), Nic(IGB, 'rp2', '0000:02:00.0'),
            _rp('rp3', 'pcie.0', 3, '0x4'), Window('rp3', '0000:03:00.0')),
           (('0000:01:00.0', '0000:02:00.0', 'PHB'), ('0000:01:00.0', '0000:03:00.0', 'PHB'))),
    Preset('switch', 'a root port to a PCIe switch with igb A and the window on two downstream ports; '
           'igb B on a second root port',
           (_rp('rp1', 'pcie.0', 1, '0x2'), Port('up1', 'x3130-upstream', 'rp1'),
            Port('dn1', 'xio3130-downstream', 'up1', 'chassis=11,slot=1'), Nic(IGB, 'dn1', '0000:03:00.0'),
            Port('dn2', 'xio3130-downstream', 'up1', 'chassis=12,slot=2'), Window('dn2', '0000:04:00.0'),
            _rp('rp2', 'pcie.0', 2, '0x3'), Nic(IGB, 'rp2', '0000:05:00.0')),
           (('0000:03:00.0', '0000:04:00.0', 'PIX'), ('0000:05:00.0', '0000:04:00.0', 'PHB'),
            ('0000:03:00.0', '0000:05:00.0', 'PHB'))),
    Preset('numa', 'two NUMA nodes: igb A and window 0 on two pxb-pcie host bridges of node 0; '
           'a pxb-pcie host bridge on node 1 carrying igb B and window 1',
           (Port('pxb0a', 'pxb-pcie', 'pcie.0', 'bus_nr=0x20,numa_node=0,addr=0x2'),
            _rp('rp1', 'pxb0a', 1), Nic(IGB, 'rp1', '0000:21:00.0'),
            Port('pxb0b', 'pxb-pcie', 'pcie.0', 'bus_nr=0x40,numa_node=0,addr=0x3'),
            _rp('rp2', 'pxb0b', 2), Window('rp2', '0000:41:00.0'),
            Port('pxb1', 'pxb-pcie', 'pcie.0', 'bus_nr=0x80,numa_node=1,addr=0x4'),
            _rp('rp3', 'pxb1', 3), Nic(IGB, 'rp3', '0000:81:00.0'),
            _rp('rp4', 'pxb1', 4), Window('rp4', '0000:82:00.0')),
           (('0000:21:00.0', '0000:41:00.0', 'NODE'), ('0000:81:00.0', '0000:82:00.0', 'PHB'),
            ('0000:21:00.0', '0000:81:00.0', 'SYS')),
           numa=True),
    Preset('virtio', 'two virtio-net NICs (modern, iommu_platform) on one hub and one 64 MiB ivshmem window, '
           'each behind its own root port (lab/lab run --virtio-net PROPS adds device properties, --queues N '
           'queue pairs)',
           (_rp('rp1', 'pcie.0', 1, '0x2'), Nic(VIRTIO_NET, 'rp1', '0000:01:00.0'),
            _rp('rp2', 'pcie.0', 2, '0x3'), Nic(VIRTIO_NET, 'rp2', '0000:02:00.0'),
            _rp('rp3', 'pcie.0', 3, '0x4'), Window('rp3', '0000:03:00.0')),
           (('0000:01:00.0', '0000:02:00.0', 'PHB'), ('0000:01:00.0', '0000:03:00.0', 'PHB'))),
    Preset('e1000e', 'two e1000e NICs and a window below two nested PCIe switches: '
           'e1000e A on the outer switch, e1000e B and the window on the inner one',
           (_rp('rp1', 'pcie.0', 1, '0x2'), Port('up1', 'x3130-upstream', 'rp1'),
            Port('dn1', 'xio3130-downstream', 'up1', 'chassis=11,slot=1'), Nic(E1000E, 'dn1', '0000:03:00.0'),
            Port('dn2', 'xio3130-downstream', 'up1', 'chassis=12,slot=2'), Port('up2', 'x3130-upstream', 'dn2'),
            Port('dn3', 'xio3130-downstream', 'up2', 'chassis=13,slot=1'), Nic(E1000E, 'dn3', '0000:06:00.0'),
            Port('dn4', 'xio3130-downstream', 'up2', 'chassis=14,slot=2'), Window('dn4', '0000:07:00.0')),
           (('0000:06:00.0', '0000:07:00.0', 'PIX'), ('0000:03:00.0', '0000:06:00.0', 'PXB'),
            ('0000:03:00.0', '0000:07:00.0', 'PXB'))),
]}


def preset_qemu_args(preset, shm_paths, virtio_net='', queues=1):
    """QEMU arguments of a preset's devices; shm_paths[i] backs window i; virtio_net: extra properties of every
    virtio-net NIC (e.g. packed=on,mrg_rxbuf=off); queues: queue pairs of each virtio-net NIC's netdev (1: QEMU's
    hub; more: taps on a bridge, network.py)."""
    args = []
    if preset.numa:
        args += ['-object', 'memory-backend-ram,id=m0,size=512M', '-object', 'memory-backend-ram,id=m1,size=512M',
                 '-numa', 'node,nodeid=0,cpus=0,memdev=m0', '-numa', 'node,nodeid=1,cpus=1,memdev=m1']
    nic_n = win_n = 0
    for d in preset.devices:
        if isinstance(d, Port):
            props = f',{d.props}' if d.props else ''
            args += ['-device', f'{d.kind},id={d.id},bus={d.bus}{props}']
        elif isinstance(d, Nic):
            # Every NIC on one wire (network.py): what one transmits, the others receive.
            props = ''.join(f',{p}' for p in (MODEL_PROPS.get(d.model[0], ''),
                                              network.nic_props(queues) if d.model == VIRTIO_NET else '',
                                              virtio_net if d.model == VIRTIO_NET else '') if p)
            args += ['-netdev', network.netdev(nic_n, queues),
                     '-device', f'{d.model[0]},netdev=nic{nic_n},bus={d.bus},mac=52:54:00:12:34:{0x10 + nic_n:02x}'
                                f'{props}']
            nic_n += 1
        else:
            args += ['-object', f'memory-backend-file,id=win{win_n},share=on,mem-path={shm_paths[win_n]},'
                                f'size={d.size_mib}M',
                     '-device', f'ivshmem-plain,memdev=win{win_n},bus={d.bus}']
            win_n += 1
    return args


def describe_presets():
    out = []
    for p in PRESETS.values():
        out.append(f'{p.name}: {p.summary}')
        for n in p.nics:
            out.append(f'    NIC     {n.bdf}  {n.model[0]} ({n.model[1]})')
        for i, w in enumerate(p.windows):
            out.append(f'    window{i} {w.bdf}  ivshmem-plain, BAR2 = {w.size_mib} MiB')
        for a, b, cls in p.classes:
            out.append(f'    {cls:<7} {a} <-> {b}')
    return '\n'.join(out)
