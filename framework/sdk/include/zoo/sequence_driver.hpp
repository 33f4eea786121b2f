#pragma once
// A sequence that is more than a text prompt and sampled tokens: its positions carry rows of
// another modality (row tables, zoo/row_tables.hpp) and its next position comes from its own pick
// (several codebooks at once, say). A scheduler (the engine, a plain loop over a Session) runs its
// positions as it runs text, in chunks, and hands back the results of the steps that end at its
// newest position; the driver owns the prompt, the sampler and the stopping rule, so a sequence's
// picks do not depend on what it was batched with.
#include <cstdint>

#include "zoo/model.hpp"

namespace zoo {

class SequenceDriver {
 public:
  virtual ~SequenceDriver() = default;
  // Positions whose inputs are known: the prompt, then every pick fed back. accept() adds one
  // unless the sequence is done.
  virtual std::int64_t known() const = 0;
  // The most positions it can ever hold (the prompt plus every pick it may feed back): what a
  // scheduler admits by.
  virtual std::int64_t max_positions() const = 0;
  // The inputs of positions [begin, end), end <= known(): ids and table rows, relative to
  // `begin` as ForwardStep wants them. When end == known() the step also asks for the outputs the
  // next pick needs (and draws its random numbers, once per pick however often this is called).
  // The spans point into the driver: valid until the next call of step() or accept().
  virtual ForwardStep step(std::int64_t begin, std::int64_t end) = 0;
  // The result of a step that ended at known(): picks the next position's inputs. Returns true
  // when the sequence is done (nothing more to feed back).
  virtual bool accept(const ForwardResult& result) = 0;
  virtual bool done() const = 0;
};

}  // namespace zoo
