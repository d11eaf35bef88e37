#include "vfio/device.hpp"

#include <linux/vfio.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.hpp"
#include "core/file.hpp"
#include "core/log.hpp"

namespace bardrive::vfio {

namespace {
constexpr std::uint16_t pci_command = 0x04;  // PCI Local Bus spec 3.0, 6.2.2: Command register
constexpr std::uint16_t cmd_memory_space = 1u << 1;
constexpr std::uint16_t cmd_bus_master = 1u << 2;

const char* irq_name(IrqType t) {
    switch (t) {
        case IrqType::intx:
            return "INTx";
        case IrqType::msi:
            return "MSI";
        case IrqType::msix:
            return "MSI-X";
    }
    return "?";
}
}  // namespace

Device Device::open(Domain& domain, const pci::Bdf& bdf) { return open_with(domain, bdf, nullptr); }

Device Device::open(Domain& domain, const pci::Bdf& bdf, const VfToken& vf_token) {
    return open_with(domain, bdf, &vf_token);
}

Device Device::open_with(Domain& domain, const pci::Bdf& bdf, const VfToken* vf_token) {
    Device d;
    d.fd_ = domain.attach(bdf, vf_token);
    d.domain_ = &domain;
    d.bdf_ = bdf;
    vfio_device_info info{};
    info.argsz = sizeof info;
    if (::ioctl(d.fd_.get(), VFIO_DEVICE_GET_INFO, &info) != 0)
        throw Error::from_errno("get VFIO device info of", bdf.str(), errno);
    if (!(info.flags & VFIO_DEVICE_FLAGS_PCI))
        throw Error("open device", bdf.str(), "VFIO says it is not a PCI device");
    d.num_regions_ = info.num_regions;
    d.num_irqs_ = info.num_irqs;
    d.can_reset_ = (info.flags & VFIO_DEVICE_FLAGS_RESET) != 0;
    RegionInfo cfg = d.region_info(VFIO_PCI_CONFIG_REGION_INDEX);
    d.config_offset_ = cfg.offset;
    log::debug("opened ", bdf.str(), ": ", d.num_regions_, " regions, ", d.num_irqs_, " irq types",
               d.can_reset_ ? ", reset" : "");
    return d;
}

Device::Device(Device&& o) noexcept
    : domain_(std::exchange(o.domain_, nullptr)),
      bdf_(o.bdf_),
      fd_(std::move(o.fd_)),
      num_regions_(o.num_regions_),
      num_irqs_(o.num_irqs_),
      can_reset_(o.can_reset_),
      config_offset_(o.config_offset_),
      irq_type_(o.irq_type_),
      irq_fds_(std::move(o.irq_fds_)) {}

Device& Device::operator=(Device&& o) noexcept {
    if (this != &o) {
        Device old(std::move(*this));  // releases what this held at the end of the scope
        domain_ = std::exchange(o.domain_, nullptr);
        bdf_ = o.bdf_;
        fd_ = std::move(o.fd_);
        num_regions_ = o.num_regions_;
        num_irqs_ = o.num_irqs_;
        can_reset_ = o.can_reset_;
        config_offset_ = o.config_offset_;
        irq_type_ = o.irq_type_;
        irq_fds_ = std::move(o.irq_fds_);
    }
    return *this;
}

Device::~Device() {
    if (!fd_) return;
    disable_irqs();
    fd_.reset();
    if (domain_ != nullptr) domain_->detach(bdf_);
}

int Device::numa_node() const {
    auto text = file::try_read_text("/sys/bus/pci/devices/" + bdf_.str() + "/numa_node");
    if (!text) return -1;
    try {
        return std::stoi(*text);
    } catch (const std::exception&) {
        return -1;
    }
}

RegionInfo Device::region_info(unsigned index) const {
    if (index >= num_regions_)
        throw Error("get region info of", bdf_.str(),
                    log::concat("region ", index, " does not exist (the device has ", num_regions_, ")"));
    std::vector<std::uint8_t> buf(sizeof(vfio_region_info));
    for (int attempt = 0; attempt < 2; ++attempt) {
        auto* ri = reinterpret_cast<vfio_region_info*>(buf.data());
        ri->argsz = static_cast<std::uint32_t>(buf.size());
        ri->index = index;
        if (::ioctl(fd_.get(), VFIO_DEVICE_GET_REGION_INFO, ri) != 0)
            throw Error::from_errno("get region info of", log::concat(bdf_.str(), " region ", index), errno);
        if (ri->argsz <= buf.size()) break;
        buf.resize(ri->argsz);
    }
    const auto* ri = reinterpret_cast<const vfio_region_info*>(buf.data());
    RegionInfo out;
    out.index = index;
    out.size = ri->size;
    out.offset = ri->offset;
    out.readable = ri->flags & VFIO_REGION_INFO_FLAG_READ;
    out.writable = ri->flags & VFIO_REGION_INFO_FLAG_WRITE;
    out.mmappable = ri->flags & VFIO_REGION_INFO_FLAG_MMAP;
    if (ri->flags & VFIO_REGION_INFO_FLAG_CAPS) {
        std::uint32_t off = ri->cap_offset;
        while (off != 0 && off + sizeof(vfio_info_cap_header) <= buf.size()) {
            const auto* hdr = reinterpret_cast<const vfio_info_cap_header*>(buf.data() + off);
            if (hdr->id == VFIO_REGION_INFO_CAP_SPARSE_MMAP &&
                off + sizeof(vfio_region_info_cap_sparse_mmap) <= buf.size()) {
                const auto* cap = reinterpret_cast<const vfio_region_info_cap_sparse_mmap*>(hdr);
                std::size_t end =
                    off + sizeof(*cap) + std::size_t{cap->nr_areas} * sizeof(vfio_region_sparse_mmap_area);
                if (end > buf.size())
                    throw Error("parse region info of", bdf_.str(), "sparse-mmap capability runs past the buffer");
                for (std::uint32_t i = 0; i < cap->nr_areas; ++i) {
                    const auto& a = cap->areas[i];
                    if (a.offset > out.size || a.size > out.size - a.offset)
                        throw Error("parse region info of", bdf_.str(), "sparse-mmap area outside its region");
                    out.sparse.push_back({a.offset, a.size});
                }
            }
            if (hdr->next <= off) break;
            off = hdr->next;
        }
    }
    return out;
}

Mmio Device::map_bar(unsigned bar) const {
    std::string name = log::concat(bdf_.str(), " BAR", bar);
    if (bar > VFIO_PCI_BAR5_REGION_INDEX) throw Error("map", name, "a PCI device has BARs 0 to 5 only");
    RegionInfo ri = region_info(bar);
    if (ri.size == 0)
        throw Error("map", name, "the device has no such BAR (or it is the upper half of a 64-bit BAR)",
                    "'lspci -vv -s " + bdf_.str() + "' lists its BARs");
    if (!ri.mmappable)
        throw Error("map", name,
                    "the kernel does not allow mmap of this region (an I/O-port BAR, or a BAR "
                    "smaller than a page on an old kernel)",
                    "access it with pread/pwrite on the device fd instead");
    std::size_t size = ri.size;
    int prot = (ri.readable ? PROT_READ : 0) | (ri.writable ? PROT_WRITE : 0);
    if (ri.sparse.empty()) {
        void* p = ::mmap(nullptr, size, prot, MAP_SHARED, fd_.get(), static_cast<off_t>(ri.offset));
        if (p == MAP_FAILED) throw Error::from_errno("mmap", name, errno);
        return Mmio::adopt(p, size, name);
    }
    // Only parts may be mapped (e.g. around the MSI-X table): reserve the whole window inaccessible,
    // then map each allowed area over it. Touching a hole faults instead of reaching other memory.
    void* base = ::mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) throw Error::from_errno("reserve address space for", name, errno);
    Mmio window = Mmio::adopt(base, size, name);
    for (const auto& a : ri.sparse) {
        if (a.size == 0) continue;
        void* p = ::mmap(static_cast<std::uint8_t*>(base) + a.offset, a.size, prot, MAP_SHARED | MAP_FIXED, fd_.get(),
                         static_cast<off_t>(ri.offset + a.offset));
        if (p == MAP_FAILED)
            throw Error::from_errno("mmap", log::concat(name, " area +0x", std::hex, a.offset, " size 0x", a.size),
                                    errno);
    }
    log::debug("mapped ", name, " sparsely (", ri.sparse.size(), " areas)");
    return window;
}

void Device::config_access(bool write, std::uint32_t offset, void* buf, std::size_t len) const {
    constexpr std::uint32_t config_size = 4096;  // PCIe extended config space
    if (offset > config_size || len > config_size - offset || offset % len != 0)
        throw Error(
            write ? "write config space of" : "read config space of", bdf_.str(),
            log::concat("offset 0x", std::hex, offset, " width ", std::dec, len, " is outside 4 KiB or unaligned"));
    auto pos = static_cast<off_t>(config_offset_ + offset);
    ssize_t n = write ? ::pwrite(fd_.get(), buf, len, pos) : ::pread(fd_.get(), buf, len, pos);
    if (n != static_cast<ssize_t>(len))
        throw Error::from_errno(write ? "write config space of" : "read config space of",
                                log::concat(bdf_.str(), " at 0x", std::hex, offset), n < 0 ? errno : EIO);
}

// PCI config space is little-endian, like every host bardrive targets.
std::uint8_t Device::config_read8(std::uint32_t offset) const {
    std::uint8_t v = 0;
    config_access(false, offset, &v, sizeof v);
    return v;
}
std::uint16_t Device::config_read16(std::uint32_t offset) const {
    std::uint16_t v = 0;
    config_access(false, offset, &v, sizeof v);
    return v;
}
std::uint32_t Device::config_read32(std::uint32_t offset) const {
    std::uint32_t v = 0;
    config_access(false, offset, &v, sizeof v);
    return v;
}
void Device::config_write8(std::uint32_t offset, std::uint8_t value) const {
    config_access(true, offset, &value, sizeof value);
}
void Device::config_write16(std::uint32_t offset, std::uint16_t value) const {
    config_access(true, offset, &value, sizeof value);
}
void Device::config_write32(std::uint32_t offset, std::uint32_t value) const {
    config_access(true, offset, &value, sizeof value);
}

void Device::enable_bus_master() const {
    std::uint16_t cmd = config_read16(pci_command);
    config_write16(pci_command, cmd | cmd_memory_space | cmd_bus_master);
    std::uint16_t back = config_read16(pci_command);
    if ((back & (cmd_memory_space | cmd_bus_master)) != (cmd_memory_space | cmd_bus_master))
        throw Error("enable bus master on", bdf_.str(),
                    log::concat("command register reads 0x", std::hex, back, " after setting bits 1 and 2"));
}

IrqInfo Device::irq_info(IrqType type) const {
    vfio_irq_info ii{};
    ii.argsz = sizeof ii;
    ii.index = static_cast<std::uint32_t>(type);
    if (ii.index >= num_irqs_) return {type, 0, false, false, false};
    if (::ioctl(fd_.get(), VFIO_DEVICE_GET_IRQ_INFO, &ii) != 0)
        throw Error::from_errno(log::concat("get ", irq_name(type), " info of"), bdf_.str(), errno);
    return {type, ii.count, (ii.flags & VFIO_IRQ_INFO_EVENTFD) != 0, (ii.flags & VFIO_IRQ_INFO_MASKABLE) != 0,
            (ii.flags & VFIO_IRQ_INFO_AUTOMASKED) != 0};
}

void Device::enable_irqs(IrqType type, unsigned count) {
    const std::string what = log::concat(bdf_.str(), " ", irq_name(type));
    IrqInfo info = irq_info(type);
    if (count == 0 || count > info.count)
        throw Error("enable interrupts of", what,
                    log::concat(count, " vector(s) asked for, the device offers ", info.count),
                    info.count == 0 ? "the device has no such capability; try another interrupt type" : "");
    disable_irqs();
    std::vector<UniqueFd> fds;
    std::vector<std::uint8_t> buf(sizeof(vfio_irq_set) + count * sizeof(std::int32_t));
    auto* set = reinterpret_cast<vfio_irq_set*>(buf.data());
    set->argsz = static_cast<std::uint32_t>(buf.size());
    set->flags = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER;
    set->index = static_cast<std::uint32_t>(type);
    set->start = 0;
    set->count = count;
    for (unsigned i = 0; i < count; ++i) {
        UniqueFd efd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
        if (!efd) throw Error::from_errno("create eventfd for", what, errno);
        std::int32_t raw = efd.get();
        std::memcpy(set->data + i * sizeof raw, &raw, sizeof raw);
        fds.push_back(std::move(efd));
    }
    if (::ioctl(fd_.get(), VFIO_DEVICE_SET_IRQS, set) != 0)
        throw Error::from_errno(
            "route interrupts to eventfds:", what, errno,
            errno == EINVAL ? "another interrupt type may still be enabled, or the vector count is unsupported" : "");
    irq_type_ = type;
    irq_fds_ = std::move(fds);
    log::debug("enabled ", count, " ", irq_name(type), " vector(s) on ", bdf_.str());
}

void Device::disable_irqs() noexcept {
    if (irq_fds_.empty()) return;
    vfio_irq_set set{};
    set.argsz = sizeof set;
    set.flags = VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_TRIGGER;
    set.index = static_cast<std::uint32_t>(irq_type_);
    set.count = 0;  // count 0 + DATA_NONE: disable every vector of this type
    if (::ioctl(fd_.get(), VFIO_DEVICE_SET_IRQS, &set) != 0)
        log::warn("disable ", irq_name(irq_type_), " on ", bdf_.str(), " failed: ", std::strerror(errno));
    irq_fds_.clear();
}

int Device::irq_fd(unsigned vector) const noexcept { return vector < irq_fds_.size() ? irq_fds_[vector].get() : -1; }

std::uint64_t Device::wait_irq(unsigned vector, int timeout_ms) const noexcept {
    int fd = irq_fd(vector);
    if (fd < 0) return 0;
    pollfd p{fd, POLLIN, 0};
    int r;
    do {
        r = ::poll(&p, 1, timeout_ms);
    } while (r < 0 && errno == EINTR);
    if (r <= 0) return 0;
    std::uint64_t n = 0;
    if (::read(fd, &n, sizeof n) != static_cast<ssize_t>(sizeof n)) return 0;
    return n;
}

void Device::irq_action(std::uint32_t action, unsigned vector, const char* what) const {
    const std::string obj = log::concat(bdf_.str(), " ", irq_name(irq_type_), " vector ", vector);
    if (vector >= irq_fds_.size())
        throw Error(what, obj, log::concat("not enabled (", irq_fds_.size(), " vector(s) enabled)"),
                    "call enable_irqs() first");
    vfio_irq_set set{};
    set.argsz = sizeof set;
    set.flags = VFIO_IRQ_SET_DATA_NONE | action;
    set.index = static_cast<std::uint32_t>(irq_type_);
    set.start = vector;
    set.count = 1;
    if (::ioctl(fd_.get(), VFIO_DEVICE_SET_IRQS, &set) != 0) {
        int err = errno;
        std::string hint;
        if (irq_type_ != IrqType::intx && (err == EINVAL || err == ENOTTY))
            hint = "vfio-pci masks only INTx; mask MSI/MSI-X vectors in the device (its interrupt mask register)";
        throw Error::from_errno(what, obj, err, hint);
    }
}

void Device::mask_irq(unsigned vector) const { irq_action(VFIO_IRQ_SET_ACTION_MASK, vector, "mask"); }
void Device::unmask_irq(unsigned vector) const { irq_action(VFIO_IRQ_SET_ACTION_UNMASK, vector, "unmask"); }

void Device::set_vf_token(const VfToken& token) const {
    alignas(vfio_device_feature) std::uint8_t buf[sizeof(vfio_device_feature) + 16] = {};
    auto* f = reinterpret_cast<vfio_device_feature*>(buf);
    f->argsz = sizeof buf;
    f->flags = VFIO_DEVICE_FEATURE_SET | VFIO_DEVICE_FEATURE_PCI_VF_TOKEN;
    std::memcpy(f->data, token.bytes().data(), 16);
    if (::ioctl(fd_.get(), VFIO_DEVICE_FEATURE, f) != 0) {
        int err = errno;
        throw Error::from_errno("set the VF token of", bdf_.str(), err,
                                err == EINVAL || err == ENOTTY
                                    ? "only a PF with SR-IOV, bound to vfio-pci (enable_sriov=1), takes a VF token"
                                    : "");
    }
}

void Device::reset() const {
    if (!can_reset_)
        throw Error("reset", bdf_.str(),
                    "the kernel offers no reset for this device (no FLR, PM or bus reset it may use)",
                    "re-initialise it through its registers instead");
    if (::ioctl(fd_.get(), VFIO_DEVICE_RESET) != 0) throw Error::from_errno("reset", bdf_.str(), errno);
}

}  // namespace bardrive::vfio
