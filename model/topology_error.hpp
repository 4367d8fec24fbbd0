#pragma once
// A cluster shape that does not fit a topology kind's parameters, naming the scenario key that is wrong
// (cluster.KEY): TopologyKind::check throws it where one key is to blame, so that a message names that key and not
// cluster.topology.
#include <stdexcept>
#include <string>
#include <utility>

namespace lcsim {

class TopologyKeyError : public std::invalid_argument {
 public:
  TopologyKeyError(std::string key, const std::string& message)
      : std::invalid_argument(message), key_(std::move(key)) {}
  /// The key of the scenario's `cluster` object ("domain_gpus").
  const std::string& key() const { return key_; }

 private:
  std::string key_;
};

}  // namespace lcsim
