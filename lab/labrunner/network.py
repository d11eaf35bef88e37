"""The NICs' QEMU network: every NIC of a preset on one wire, what one transmits the others receive.

hub (the default): QEMU's hub (`-netdev hubport`, hub 0); nothing on the host side. A hubport is a single-queue
  backend: a virtio-net NIC on it has one queue pair, and QEMU offers it no checksum or segmentation offloads
  (those need a peer with a virtio-net header).
taps (`--queues N`, N >= 2, virtio-net NICs): a multiqueue backend. Each NIC's netdev is a tap device with N queues
  (`-netdev tap,queues=N`, the NIC `mq=on,vectors=2N+2`); the taps are ports of one Linux bridge that neither
  learns nor sends anything of its own (IPv6 off, no STP, no multicast snooping), so it floods every frame to the
  other ports as the hub does. Bridge and taps live in a network namespace of the run's own (`unshare --net`
  around QEMU): the host's network is never touched, parallel runs never meet, and everything is gone with QEMU.
  The taps carry the virtio-net header, so QEMU offers the checksum and segmentation offloads here. A bridge
  does not forward IEEE 802.1D link-local frames (01:80:c2:00:00:00-02, e.g. pause frames).
"""

import os

from .common import check_tools

MAX_QUEUES = 16
TAP_MTU = 65521  # a tap's largest: jumbo frames (host_mtu=9000) cross the bridge

# Runs as root of the run's network namespace, then becomes QEMU: sh -c SCRIPT lab-net NICS QUEUES QEMU-ARGV...
_NAMESPACE_SCRIPT = r'''
fail() {
    echo "lab: --queues: '$*' failed in the run's network namespace: the host needs tun and bridge in its kernel," \
         "iproute2, and /dev/net/tun open to this user (root, or mode 0666 as Debian's udev makes it)" >&2
    exit 1
}
nics=$1; shift 2
echo 1 >/proc/sys/net/ipv6/conf/all/disable_ipv6 || fail disable IPv6
echo 1 >/proc/sys/net/ipv6/conf/default/disable_ipv6 || fail disable IPv6
ip link add br0 type bridge stp_state 0 mcast_snooping 0 group_fwd_mask 0xfff8 || fail ip link add br0 type bridge
i=0
while [ $i -lt $nics ]; do
    ip tuntap add dev tap$i mode tap multi_queue || fail ip tuntap add dev tap$i mode tap multi_queue
    ip link set tap$i mtu %d master br0 || fail ip link set tap$i master br0
    ip link set tap$i type bridge_slave learning off flood on mcast_flood on || fail bridge_slave learning off
    ip link set tap$i up || fail ip link set tap$i up
    i=$((i + 1))
done
ip link set br0 up || fail ip link set br0 up
exec "$@"
''' % TAP_MTU


def netdev(n, queues):
    """The -netdev argument of NIC n (its id nicN is the name request-set_link and QMP set_link use)."""
    if queues == 1:
        return f'hubport,id=nic{n},hubid=0'
    return f'tap,id=nic{n},ifname=tap{n},script=no,downscript=no,vhost=off,queues={queues}'


def nic_props(queues):
    """Device properties a virtio-net NIC needs for `queues` queue pairs: MQ, and an MSI-X vector per queue,
    one for the control queue and one for configuration changes."""
    return '' if queues == 1 else f'mq=on,vectors={2 * queues + 2}'


def wrap(argv, nics, queues):
    """QEMU's argv as the run starts it: unchanged on the hub; in a network namespace of its own, with the
    bridge and one tap per NIC made first, for several queues."""
    if queues == 1:
        return argv
    check_tools(('unshare', 'util-linux'), ('ip', 'iproute2'))
    # Not root: a user namespace makes the run root of its own network namespace (tap and bridge need that).
    user = [] if os.geteuid() == 0 else ['--map-root-user']
    return ['unshare', *user, '--net', '--', '/bin/sh', '-c', _NAMESPACE_SCRIPT, 'lab-net', str(nics), str(queues),
            *argv]
