// bardrive::Error: the one error type of set-up paths (see docs/ARCHITECTURE.md).
#pragma once

#include <stdexcept>
#include <string>

namespace bardrive {

// What failed (operation), on what (object: a BDF, a group, a path), the errno text
// when a system call failed, and what the user can do about it when known.
class Error : public std::runtime_error {
public:
    Error(std::string operation, std::string object, std::string detail, std::string hint = {});

    // Builds an Error from errno (captured by the caller right after the failing call).
    static Error from_errno(std::string operation, std::string object, int err, std::string hint = {});

    const std::string& operation() const noexcept { return operation_; }
    const std::string& object() const noexcept { return object_; }
    const std::string& detail() const noexcept { return detail_; }
    const std::string& hint() const noexcept { return hint_; }
    int error_number() const noexcept { return errno_; }

private:
    std::string operation_;
    std::string object_;
    std::string detail_;
    std::string hint_;
    int errno_ = 0;
};

}  // namespace bardrive
