#include "rne/runner/backends.h"

#include <executorch/runtime/backend/interface.h>

namespace rne::runner {

std::vector<std::string> registered_backends() {
  namespace rt = ::executorch::runtime;
  std::vector<std::string> names;
  const size_t count = rt::get_num_registered_backends();
  for (size_t i = 0; i < count; ++i) {
    auto name = rt::get_backend_name(i);
    if (name.ok()) names.emplace_back(*name);
  }
  return names;
}

bool has_backend(const std::string& name) {
  return ::executorch::runtime::get_backend_class(name.c_str()) != nullptr;
}

}  // namespace rne::runner
