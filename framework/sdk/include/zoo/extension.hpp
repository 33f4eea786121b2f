#pragma once
// Capabilities beyond text decoding (speech, codecs, row tables, ...) are extensions a model hands
// out by name at run time (Model::find_extension), not members of Model: adding one leaves Model's
// layout alone, so plugins built before it keep loading, and a model offers only what it has.
//
// An extension is an abstract class deriving from Extension with
//   static constexpr std::string_view kName = "zoo.<what>.v<N>";  // a changed interface is a new N
//   static constexpr std::string_view kLacking = "<does something>";  // "model 'x' (plugin y) <...>"
// A model that offers it returns the address of its E subobject, converted to Extension*, from
// find_extension(E::kName), so the host's static_cast back to E* lands on the same object. The
// model owns what it returns: valid while the model lives.

namespace zoo {

class Extension {
 public:
  Extension(const Extension&) = delete;
  Extension& operator=(const Extension&) = delete;

 protected:
  Extension() = default;
  ~Extension() = default;  // not deleted through this base: the model owns it
};

}  // namespace zoo
