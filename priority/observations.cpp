#include "observations.hpp"

namespace tnbc::priority {

std::string_view to_string(Op op) {
  switch (op) {
    case Op::alltoall: return "alltoall";
    case Op::alltoallv: return "alltoallv";
    case Op::bcast: return "bcast";
  }
  return "?";
}

std::optional<Op> parse_op(std::string_view text) {
  for (Op op : {Op::alltoall, Op::alltoallv, Op::bcast})
    if (text == to_string(op)) return op;
  return std::nullopt;
}

}  // namespace tnbc::priority
