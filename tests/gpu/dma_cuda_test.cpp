// dma::CudaMemory on a real GPU: memory allocated with the CUDA driver API, exported as a dma-buf fd
// with its size and alignment, and the CPU mapping of that dma-buf where the driver allows it.
// Without a GPU (or a CUDA driver) every case SKIPs with the reason.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <cstdio>
#include <cstring>

#include "core/error.hpp"
#include "dma/cuda_memory.hpp"

using namespace bardrive;
using Catch::Matchers::ContainsSubstring;

namespace {
dma::CudaMemory allocate_or_skip(std::size_t bytes) {
    try {
        return dma::CudaMemory::allocate(bytes, 0);
    } catch (const Error& e) {
        std::string why = e.what();
        if (why.find("load the CUDA driver") != std::string::npos || why.find("there are 0 GPU") != std::string::npos ||
            why.find("cuInit") != std::string::npos)
            SKIP("no usable NVIDIA GPU here: " + why);
        throw;
    }
}
}  // namespace

TEST_CASE("GPU memory is exported as a dma-buf with its size and alignment", "[gpu]") {
    dma::CudaMemory mem = allocate_or_skip((std::size_t{1} << 20) + 1);
    CHECK(mem.size() == (std::size_t{2} << 20));  // rounded up to the 2 MiB export granularity
    CHECK(mem.alignment() == (std::size_t{2} << 20));
    CHECK(mem.device_ptr() % mem.alignment() == 0);
    REQUIRE(mem.dmabuf_fd() >= 0);
    // A dma-buf reports its size through lseek(SEEK_END): the exporter agrees with us.
    CHECK(::lseek(mem.dmabuf_fd(), 0, SEEK_END) == static_cast<off_t>(mem.size()));
    std::string exporter = mem.exporter();
    CHECK_FALSE(exporter.empty());
    std::printf("dma-buf exporter: %s, %zu bytes at 0x%llx\n", exporter.c_str(), mem.size(),
                static_cast<unsigned long long>(mem.device_ptr()));

    dma::CudaMemory big = allocate_or_skip(std::size_t{1} << 30);
    CHECK(big.size() == (std::size_t{1} << 30));
    CHECK(::lseek(big.dmabuf_fd(), 0, SEEK_END) == static_cast<off_t>(big.size()));
    dma::CudaMemory moved = std::move(big);
    CHECK(moved.dmabuf_fd() >= 0);
    CHECK(big.dmabuf_fd() == -1);
}

TEST_CASE("the CPU mapping of the dma-buf works or says the driver does not support it", "[gpu]") {
    dma::CudaMemory mem = allocate_or_skip(std::size_t{2} << 20);
    try {
        void* p = mem.map_cpu();
        auto* bytes = static_cast<volatile unsigned char*>(p);
        bytes[0] = 0x5a;
        CHECK(bytes[0] == 0x5a);
        std::printf("dma-buf mmap: supported by %s\n", mem.exporter().c_str());
    } catch (const Error& e) {
        CHECK_THAT(e.what(), ContainsSubstring("unsupported on this driver") && ContainsSubstring("exporter"));
        std::printf("dma-buf mmap: %s\n", e.what());
    }
}

TEST_CASE("bad GPU requests are refused", "[gpu]") {
    { dma::CudaMemory probe = allocate_or_skip(4096); }
    CHECK_THROWS_WITH(dma::CudaMemory::allocate(0, 0), ContainsSubstring("0 bytes"));
    CHECK_THROWS_WITH(dma::CudaMemory::allocate(4096, 99), ContainsSubstring("GPU(s)"));
}
