// The engine's ledger of one rank (engine_ledger.hpp).
#include "engine_ledger.hpp"

#include <algorithm>
#include <cmath>

namespace tnbc::shim::replay::adapt {
namespace {

void add(std::atomic<double>& field, double v) { field.fetch_add(v, std::memory_order_relaxed); }

}  // namespace

const char* name(JointVerdict v) {
  switch (v) {
    case JointVerdict::engine: return "engine";
    case JointVerdict::mpi: return "mpi";
    case JointVerdict::own: break;
  }
  return "own";
}

double samples_spread(std::span<const double> sums) {
  return std::sqrt(std::max(sums[LedgerPart::samples_spread_sq], 0.0));
}

double checks_spread(std::span<const double> sums) {
  return std::sqrt(std::max(sums[LedgerPart::checks_spread_sq], 0.0));
}

JointVerdict joint_verdict(std::span<const double> sums, int comm_size) {
  if (sums.size() < LedgerPart::kFields || sums[LedgerPart::sampled] <= comm_size) return JointVerdict::own;
  if (sums[LedgerPart::samples_engine] > sums[LedgerPart::samples_mpi] + samples_spread(sums)) return JointVerdict::mpi;
  if (sums[LedgerPart::checked] > 0 && sums[LedgerPart::checks_engine] > sums[LedgerPart::checks_mpi] + checks_spread(sums))
    return JointVerdict::mpi;
  return JointVerdict::engine;
}

void EngineLedger::add_samples(double mpi, double engine, double spread_squared) {
  add(sums_[LedgerPart::samples_mpi], mpi);
  add(sums_[LedgerPart::samples_engine], engine);
  add(sums_[LedgerPart::samples_spread_sq], spread_squared);
  add(sums_[LedgerPart::sampled], 1.0);
}

void EngineLedger::add_check(double mpi, double engine, double spread) {
  add(sums_[LedgerPart::checks_mpi], mpi);
  add(sums_[LedgerPart::checks_engine], engine);
  add(sums_[LedgerPart::checked], 1.0);
  add(sums_[LedgerPart::checks_spread_sq], spread * spread);
}

std::array<double, LedgerPart::kFields> EngineLedger::part() const {
  std::array<double, LedgerPart::kFields> p{};
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = sums_[i].load(std::memory_order_relaxed);
  return p;
}

EngineLedger& engine_ledger() {
  static EngineLedger ledger;
  return ledger;
}

}  // namespace tnbc::shim::replay::adapt
