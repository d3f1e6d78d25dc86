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

std::vector<s4u::Host*> build_platform(const PlatformSpec& spec) {
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
    // A copy within the node: shared memory, no network.
    s4u::Link* memory = zone->create_link(name + "-memory", spec.mem_Bps);
    memory->set_latency(kMemoryLatency)->seal();
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
