#pragma once
#include <memory>
#include <string_view>

#include "zoo/model.hpp"

namespace zoo {

enum class LogLevel { Debug, Info, Warning };

// Services the host offers to plugins (plugins never reach for globals).
class Host {
 public:
  virtual ~Host() = default;
  // Builds a model served by any plugin, named by plugin name or HF model_type/architecture. The
  // model keeps its plugin library loaded while it lives.
  virtual std::shared_ptr<Model> create_model(std::string_view plugin_or_type, const ModelArgs& args) = 0;
  virtual void log(LogLevel level, std::string_view message) = 0;
};

}  // namespace zoo
