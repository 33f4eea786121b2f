#include "zoo/error.hpp"

namespace zoo {

InputError::~InputError() = default;
ValidationError::~ValidationError() = default;
SettingError::~SettingError() = default;

}  // namespace zoo
