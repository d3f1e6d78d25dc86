// plan_dump FILE: parses a plan with priority's parser and prints one JSON line per entry
// ({"site","op","comm","order","priorities","segments","chains","size_class","per_node"}; chains 0:
// a binomial tree, size_class -1: any), for the end-to-end tests of `tnbc-order plan` and of
// learned plans.  A plan the parser refuses prints the error and exits 2.
#include <cstdio>
#include <string>
#include <variant>

#include "priority/plan.hpp"
#include "util/file.hpp"

using namespace tnbc::priority;

namespace {
std::string list(const std::vector<std::uint32_t>& v) {
  std::string o = "[";
  for (std::size_t i = 0; i < v.size(); ++i) o += (i ? "," : "") + std::to_string(v[i]);
  return o + "]";
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return std::fputs("usage: plan_dump FILE\n", stderr), 2;
  std::string text;
  if (auto err = tnbc::util::read_file(argv[1], kMaxPlanBytes, text))
    return std::fprintf(stderr, "plan_dump: %s\n", err->c_str()), 2;
  auto result = parse_plan(text);
  if (auto* e = std::get_if<PlanError>(&result)) {
    std::fprintf(stderr, "plan_dump: %s: %s\n", argv[1], e->to_string().c_str());
    return 2;
  }
  for (const auto& e : std::get<Plan>(result).entries) {
    // Site ids are printable ASCII without '"' or '\\' concerns beyond escaping them here.
    std::string site;
    for (char c : e.site) site += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
    std::printf("{\"site\":\"%s\",\"op\":\"%s\",\"comm\":%d,\"order\":%s,\"priorities\":%s,"
                "\"segments\":%d,\"chains\":%d,\"size_class\":%d,\"per_node\":%s}\n",
                site.c_str(), std::string(to_string(e.op)).c_str(), e.comm_size, list(e.order).c_str(),
                list(e.priorities()).c_str(), e.segments,
                e.tree.kind == TreeKind::chains ? e.tree.chains : 0, e.size_class, e.per_node ? "true" : "false");
  }
  return 0;
}
