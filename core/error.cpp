#include "core/error.hpp"

#include <cstring>

namespace bardrive {

namespace {
std::string compose(const std::string& op, const std::string& obj, const std::string& detail, const std::string& hint) {
    std::string msg = op;
    if (!obj.empty()) msg += " " + obj;
    if (!detail.empty()) msg += ": " + detail;
    if (!hint.empty()) msg += " (" + hint + ")";
    return msg;
}
}  // namespace

Error::Error(std::string operation, std::string object, std::string detail, std::string hint)
    : std::runtime_error(compose(operation, object, detail, hint)),
      operation_(std::move(operation)),
      object_(std::move(object)),
      detail_(std::move(detail)),
      hint_(std::move(hint)) {}

Error Error::from_errno(std::string operation, std::string object, int err, std::string hint) {
    Error e(std::move(operation), std::move(object), std::strerror(err), std::move(hint));
    e.errno_ = err;
    return e;
}

}  // namespace bardrive
