#include "policies/hydraulis/options.hpp"

#include <string>

namespace lcsim::hydraulis {

std::optional<Recompute> read_recompute(JsonObjectReader& reader, std::string_view key) {
  if (!reader.has(key)) return std::nullopt;
  const auto value = reader.required<std::string>(key);
  for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
    if (value == to_string(r)) return r;
  reader.fail(key, "expected \"none\", \"selective\" or \"full\", got \"" + value + "\"");
}

}  // namespace lcsim::hydraulis
