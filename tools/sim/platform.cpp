#include "platform.hpp"

#include <simgrid/s4u.hpp>

#include <cctype>
#include <charconv>
#include <stdexcept>

namespace tnbc::sim {

namespace s4u = simgrid::s4u;

int node_of(const PlatformSpec& spec, int rank) {
  return spec.cyclic ? rank % spec.nodes : rank / spec.ppn;
}

std::vector<std::vector<int>> node_members(const PlatformSpec& spec) {
  std::vector<std::vector<int>> out(static_cast<std::size_t>(spec.nodes));
  for (int r = 0; r < spec.ranks(); ++r) out[static_cast<std::size_t>(node_of(spec, r))].push_back(r);
  return out;
}

namespace {

// A node's memory link: a copy within the node (shared memory, no network).
s4u::Link* memory_link(s4u::NetZone* zone, const PlatformSpec& spec, const std::string& node) {
  s4u::Link* memory = zone->create_link(node + "-memory", spec.mem_Bps);
  memory->set_latency(kMemoryLatency)->seal();
  return memory;
}

std::vector<s4u::Host*> build_fat_tree(const PlatformSpec& spec) {
  std::vector<s4u::Host*> hosts;
  const auto leaf = static_cast<unsigned>(spec.leaf_nodes);
  const s4u::FatTreeParams params(2, {leaf, static_cast<unsigned>(spec.nodes / spec.leaf_nodes)},
                                  {1, static_cast<unsigned>(spec.spines)}, {1, 1});
  // The zone makes node `id` (its position, which destination-mod-k routes by) in id order.
  auto node = [&](s4u::NetZone* zone, const std::vector<unsigned long>&, unsigned long id) {
    s4u::Host* host = zone->create_host("node" + std::to_string(id), 1e9);
    hosts.push_back(host);
    return std::make_pair(host->get_netpoint(), static_cast<simgrid::kernel::routing::NetPoint*>(nullptr));
  };
  auto loopback = [&](s4u::NetZone* zone, const std::vector<unsigned long>&, unsigned long id) {
    return memory_link(zone, spec, "node" + std::to_string(id));
  };
  s4u::NetZone* zone = s4u::create_fatTree_zone("fat-tree", nullptr, params, s4u::ClusterCallbacks(node, loopback, {}),
                                                spec.link_Bps, spec.latency_s, s4u::Link::SharingPolicy::SPLITDUPLEX);
  zone->seal();
  return hosts;
}

}  // namespace

std::vector<s4u::Host*> build_platform(const PlatformSpec& spec) {
  if (spec.fat_tree()) return build_fat_tree(spec);
  s4u::NetZone* zone = s4u::create_star_zone("switch");
  std::vector<s4u::Host*> hosts;
  for (int n = 0; n < spec.nodes; ++n) {
    const std::string name = "node" + std::to_string(n);
    // The hosts compute nothing in the simulation (work is timed, not executed): any speed.
    s4u::Host* host = zone->create_host(name, 1e9);
    s4u::Link* link = zone->create_split_duplex_link(name + "-link", spec.link_Bps);
    link->set_latency(spec.latency_s)->seal();
    // Host to the switch on the UP half; symmetrical: from the switch to the host on DOWN.
    zone->add_route(host->get_netpoint(), nullptr, nullptr, nullptr,
                    {s4u::LinkInRoute(link, s4u::LinkInRoute::Direction::UP)}, true);
    s4u::Link* memory = memory_link(zone, spec, name);
    zone->add_route(host->get_netpoint(), host->get_netpoint(), nullptr, nullptr,
                    {s4u::LinkInRoute(memory)}, false);
    host->seal();
    hosts.push_back(host);
  }
  zone->seal();
  return hosts;
}

void run_simulation(const PlatformSpec& spec, const std::vector<std::string>& cfg,
                    const std::function<void(const std::vector<s4u::Host*>&)>& actors) {
  std::vector<std::string> args{"tnbc-sim", "--log=root.thresh:warning"};
  for (const std::string& c : cfg) args.push_back("--cfg=" + c);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(args.size());
  s4u::Engine engine(&argc, argv.data());
  actors(build_platform(spec));
  engine.run();
}

namespace {

// "<number><unit>" with the number as a double; the unit lower-cased.
std::pair<double, std::string> number_and_unit(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + i, value);
  if (i == 0 || ec != std::errc() || end != text.data() + i)
    throw std::invalid_argument("not a number: '" + std::string(text) + "'");
  std::string unit(text.substr(i));
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return {value, unit};
}

}  // namespace

double parse_rate(std::string_view text) {
  auto [value, unit] = number_and_unit(text);
  double scale = 1;
  if (!unit.empty() && std::string_view("kmgt").find(unit[0]) != std::string_view::npos) {
    scale = unit[0] == 'k' ? 1e3 : unit[0] == 'm' ? 1e6 : unit[0] == 'g' ? 1e9 : 1e12;
    unit.erase(0, 1);
  }
  if (unit == "bit") return value * scale / 8;
  if (unit == "bps") return value * scale;
  throw std::invalid_argument("not a tc rate (200mbit, 1gbit, 25mbps): '" + std::string(text) + "'");
}

double parse_time(std::string_view text) {
  auto [value, unit] = number_and_unit(text);
  if (unit == "ns") return value * 1e-9;
  if (unit == "us") return value * 1e-6;
  if (unit == "ms") return value * 1e-3;
  if (unit == "s") return value;
  throw std::invalid_argument("not a time (25us, 1ms, 0.5s): '" + std::string(text) + "'");
}

}  // namespace tnbc::sim
