#pragma once
// The row tables extension: a model keeps tables of rows on its own device and uses them as
// embeddings (ForwardStep::table_rows) or as a linear head (OutputRequest::head_table), including
// picking one id per head segment there (OutputRequest::head_sample). How a plugin building on
// another plugin's model (Host::create_model) adds a modality without the rows leaving the device.
#include <string>
#include <string_view>

#include "zoo/extension.hpp"
#include "zoo/tensor.hpp"

namespace zoo {

class RowTables : public Extension {
 public:
  static constexpr std::string_view kName = "zoo.row_tables.v1";
  static constexpr std::string_view kLacking = "takes no row tables";
  // Hands the model a table [rows, hidden_size] (float dtypes) to keep on its device. Call before
  // Model::load(); `rows` must stay valid until load() returns. Returns the table's index for the
  // step and output fields above.
  virtual int add_row_table(const std::string& name, const TensorView& rows) = 0;

 protected:
  ~RowTables() = default;
};

}  // namespace zoo
