#include "consensus.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include <fmt/format.h>

namespace tnbc::priority {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Per sub-message values of one call (step 1): delay (+inf untouched, NaN no information) and
// position (n for untouched, NaN no information).
struct CallValues {
  std::vector<double> delay;
  std::vector<double> position;
};

// Counts of repaired input, turned into one warning each at the end.
struct Repairs {
  std::size_t short_calls = 0;
  std::size_t long_calls = 0;
  std::size_t bad_delays = 0;
  std::size_t bad_tcomm = 0;
};

bool usable_touch(const FirstTouch& t) {
  return t.state == TouchState::touched && std::isfinite(t.delay_us) && t.delay_us >= 0;
}

CallValues call_values(const CallRecord& call, std::size_t n, Repairs& repairs) {
  CallValues v{std::vector<double>(n, kNaN), std::vector<double>(n, kNaN)};
  if (call.touches.size() < n) ++repairs.short_calls;
  if (call.touches.size() > n) ++repairs.long_calls;
  std::vector<std::size_t> touched;
  for (std::size_t i = 0; i < n && i < call.touches.size(); ++i) {
    const FirstTouch& t = call.touches[i];
    if (t.state == TouchState::untouched) {
      v.delay[i] = kInf;
      v.position[i] = static_cast<double>(n);
    } else if (t.state == TouchState::touched) {
      if (usable_touch(t)) {
        v.delay[i] = t.delay_us;
        touched.push_back(i);
      } else {
        ++repairs.bad_delays;  // a negative or non-finite time is a clock problem: ignore it
      }
    }
  }
  std::stable_sort(touched.begin(), touched.end(),
                   [&](std::size_t a, std::size_t b) { return v.delay[a] < v.delay[b]; });
  for (std::size_t p = 0; p < touched.size(); ++p) v.position[touched[p]] = static_cast<double>(p);
  return v;
}

// Median over the non-NaN entries of column i of `rows`.
double column_median(const std::vector<std::vector<double>>& rows, std::size_t i,
                     std::vector<double>& scratch) {
  scratch.clear();
  for (const auto& row : rows)
    if (!std::isnan(row[i])) scratch.push_back(row[i]);
  return median(scratch);
}

// Step 4: head by (delay, position, index) over finite delays, then the tail by index.
std::vector<std::size_t> order_from(const std::vector<double>& delay,
                                    const std::vector<double>& position, std::size_t& ordered) {
  std::vector<std::size_t> head, tail;
  for (std::size_t i = 0; i < delay.size(); ++i) (std::isfinite(delay[i]) ? head : tail).push_back(i);
  std::sort(head.begin(), head.end(), [&](std::size_t a, std::size_t b) {
    if (delay[a] != delay[b]) return delay[a] < delay[b];
    if (position[a] != position[b]) return position[a] < position[b];
    return a < b;
  });
  ordered = head.size();
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

// Step 2 from one rank's per-call values ([call][message]).
RankSummary step2(const std::vector<std::vector<double>>& call_delay,
                  const std::vector<std::vector<double>>& call_position, std::size_t n) {
  RankSummary out{std::vector<double>(n), std::vector<double>(n)};
  std::vector<double> scratch;
  for (std::size_t i = 0; i < n; ++i) {
    out.delay[i] = column_median(call_delay, i, scratch);
    out.position[i] = column_median(call_position, i, scratch);
  }
  return out;
}

// Number of inversions of `seq` (pairs i < j with seq[i] > seq[j]), by merge sort.
std::uint64_t count_inversions(std::vector<std::size_t>& seq) {
  std::vector<std::size_t> buffer(seq.size());
  std::uint64_t inversions = 0;
  for (std::size_t width = 1; width < seq.size(); width *= 2) {
    for (std::size_t lo = 0; lo < seq.size(); lo += 2 * width) {
      std::size_t mid = std::min(lo + width, seq.size());
      std::size_t hi = std::min(lo + 2 * width, seq.size());
      std::size_t a = lo, b = mid, out = lo;
      while (a < mid && b < hi) {
        if (seq[b] < seq[a]) {
          inversions += mid - a;
          buffer[out++] = seq[b++];
        } else {
          buffer[out++] = seq[a++];
        }
      }
      while (a < mid) buffer[out++] = seq[a++];
      while (b < hi) buffer[out++] = seq[b++];
    }
    seq.swap(buffer);
  }
  return inversions;
}

std::uint64_t pairs(std::uint64_t k) { return k < 2 ? 0 : k * (k - 1) / 2; }

}  // namespace

std::string_view to_string(Verdict verdict) {
  switch (verdict) {
    case Verdict::crc: return "crc";
    case Verdict::curc: return "curc";
    case Verdict::unread: return "unread";
  }
  return "?";
}

double median(std::vector<double>& values) {
  if (values.empty()) return kNaN;
  std::sort(values.begin(), values.end());
  std::size_t n = values.size();
  if (n % 2 == 1) return values[n / 2];
  double a = values[n / 2 - 1], b = values[n / 2];
  if (std::isinf(b)) return kInf;
  return (a + b) / 2;
}

double quantile(std::vector<double>& values, double q) {
  if (values.empty()) return kNaN;
  std::sort(values.begin(), values.end());
  double h = (static_cast<double>(values.size()) - 1) * q;
  auto lo = static_cast<std::size_t>(std::floor(h));
  std::size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (h - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

double concordance(std::span<const std::size_t> order, std::size_t order_tail,
                   std::span<const std::size_t> reference, std::size_t reference_tail) {
  // Inclusion-exclusion over the skipped pairs keeps this O(n log n) (a site of an Alltoall on
  // thousands of ranks has thousands of sub-messages, times thousands of ranks):
  //   counted = all - both in order tail - both in reference tail + both in both tails,
  // for the number of pairs and for the number of discordant pairs alike.
  const std::size_t n = order.size();
  if (reference.size() != n) return 0.0;
  constexpr std::size_t kUnset = std::numeric_limits<std::size_t>::max();
  std::vector<std::size_t> ref_pos(n, kUnset), ord_pos(n, kUnset);
  for (std::size_t p = 0; p < n; ++p) {
    if (reference[p] >= n || order[p] >= n || ref_pos[reference[p]] != kUnset ||
        ord_pos[order[p]] != kUnset)
      return 0.0;  // not permutations of the same set: nothing sensible to compare
    ref_pos[reference[p]] = p;
    ord_pos[order[p]] = p;
  }
  if (n < 2) return 1.0;
  order_tail = std::min(order_tail, n);
  reference_tail = std::min(reference_tail, n);
  auto in_order_tail = [&](std::size_t m) { return ord_pos[m] >= n - order_tail; };
  auto in_ref_tail = [&](std::size_t m) { return ref_pos[m] >= n - reference_tail; };
  // Discordant pairs within the set selected by `keep` and their number of pairs.
  auto discordant = [&](auto keep, std::uint64_t& count) {
    std::vector<std::size_t> seq;
    for (std::size_t p = 0; p < n; ++p)
      if (keep(order[p])) seq.push_back(ref_pos[order[p]]);
    count = pairs(seq.size());
    return count_inversions(seq);
  };
  std::uint64_t n_all, n_ot, n_rt, n_both;
  std::uint64_t d_all = discordant([](std::size_t) { return true; }, n_all);
  std::uint64_t d_ot = discordant(in_order_tail, n_ot);
  std::uint64_t d_rt = discordant(in_ref_tail, n_rt);
  std::uint64_t d_both =
      discordant([&](std::size_t m) { return in_order_tail(m) && in_ref_tail(m); }, n_both);
  std::uint64_t counted = n_all - n_ot - n_rt + n_both;
  std::uint64_t d = d_all - d_ot - d_rt + d_both;
  if (counted == 0) return 1.0;
  double tau = (static_cast<double>(counted) - 2.0 * static_cast<double>(d)) /
               static_cast<double>(counted);
  return std::max(0.0, tau);
}

RankSummary summarise_rank(std::span<const CallRecord> calls, std::size_t messages) {
  Repairs repairs;  // what analyse() would warn about: a summary only leaves it out
  std::vector<std::vector<double>> call_delay, call_position;
  for (const CallRecord& call : calls) {
    CallValues v = call_values(call, messages, repairs);
    call_delay.push_back(std::move(v.delay));
    call_position.push_back(std::move(v.position));
  }
  return step2(call_delay, call_position, messages);
}

Consensus consensus(std::span<const RankSummary> ranks, std::size_t messages) {
  Consensus out{{}, 0, std::vector<double>(messages), std::vector<double>(messages)};
  std::vector<std::vector<double>> delay, position;  // [rank][message]
  for (const RankSummary& r : ranks) {
    if (r.delay.size() != messages || r.position.size() != messages) continue;
    delay.push_back(r.delay);
    position.push_back(r.position);
  }
  std::vector<double> scratch;
  for (std::size_t i = 0; i < messages; ++i) {
    out.key[i] = column_median(delay, i, scratch);
    out.position[i] = column_median(position, i, scratch);
  }
  out.order = order_from(out.key, out.position, out.ordered);
  return out;
}

SiteAnalysis analyse(const CallSite& site, const ConsensusOptions& options) {
  const std::size_t n = site.messages;
  SiteAnalysis out;
  out.messages.resize(n);
  Repairs repairs;

  std::vector<RankSummary> summaries;  // [rank]
  std::vector<double> tcomm, first_touch, interval;
  std::vector<std::vector<double>> pooled(n);  // touched delays per message

  for (const RankRecord& rank : site.ranks) {
    std::vector<std::vector<double>> call_delay, call_position;  // [call][message]
    for (const CallRecord& call : rank.calls) {
      CallValues v = call_values(call, n, repairs);
      call_delay.push_back(std::move(v.delay));
      call_position.push_back(std::move(v.position));

      if (std::isfinite(call.tcomm_us) && call.tcomm_us >= 0)
        tcomm.push_back(call.tcomm_us);
      else
        ++repairs.bad_tcomm;
      double first = kInf, last = -kInf;
      std::size_t touched = 0;
      for (std::size_t i = 0; i < n && i < call.touches.size(); ++i) {
        const FirstTouch& t = call.touches[i];
        MessageStats& m = out.messages[i];
        if (usable_touch(t)) {
          ++m.touched;
          ++touched;
          pooled[i].push_back(t.delay_us);
          first = std::min(first, t.delay_us);
          last = std::max(last, t.delay_us);
        } else if (t.state == TouchState::untouched) {
          ++m.untouched;
        } else {
          ++m.unobserved;
        }
      }
      for (std::size_t i = call.touches.size(); i < n; ++i) ++out.messages[i].unobserved;
      if (touched >= 1) first_touch.push_back(first);
      if (touched >= 2) interval.push_back((last - first) / static_cast<double>(touched - 1));
    }
    // Step 2: the rank's own summary and order.
    RankSummary summary = step2(call_delay, call_position, n);
    RankAgreement agreement;
    agreement.rank = rank.rank;
    agreement.order = order_from(summary.delay, summary.position, agreement.ordered);
    out.ranks.push_back(std::move(agreement));
    summaries.push_back(std::move(summary));
  }

  // Step 3: consensus keys; step 4: order.
  const Consensus agreed = consensus(summaries, n);
  out.order = agreed.order;
  out.ordered = agreed.ordered;

  for (std::size_t i = 0; i < n; ++i) {
    MessageStats& m = out.messages[i];
    m.key_us = agreed.key[i];
    m.median_position = agreed.position[i];
    m.min_us = quantile(pooled[i], 0.0);
    m.q1_us = quantile(pooled[i], 0.25);
    m.median_us = quantile(pooled[i], 0.5);
    m.q3_us = quantile(pooled[i], 0.75);
    m.max_us = quantile(pooled[i], 1.0);
  }

  // Agreement.
  double sum = 0;
  for (RankAgreement& r : out.ranks) {
    r.concordance = concordance(r.order, n - r.ordered, out.order, n - out.ordered);
    sum += r.concordance;
    if (r.concordance < options.concordance_threshold) out.disagreeing.push_back(r.rank);
  }
  out.agreement = out.ranks.empty() ? 1.0 : sum / static_cast<double>(out.ranks.size());
  std::sort(out.disagreeing.begin(), out.disagreeing.end());

  // Timing and verdict.
  out.tcomm_us = tcomm.empty() ? 0 : median(tcomm);
  out.first_touch_us = first_touch.empty() ? 0 : median(first_touch);
  out.touch_interval_us = interval.empty() ? 0 : median(interval);
  if (first_touch.empty())
    out.verdict = Verdict::unread;
  else if (out.first_touch_us >= options.curc_fraction * out.tcomm_us)
    out.verdict = Verdict::curc;
  else
    out.verdict = Verdict::crc;

  if (repairs.short_calls)
    out.warnings.push_back(fmt::format(
        "{}: {} call(s) with fewer than {} first touches; the missing ones count as unobserved",
        site.id, repairs.short_calls, n));
  if (repairs.long_calls)
    out.warnings.push_back(fmt::format(
        "{}: {} call(s) with more than {} first touches; the extra ones are ignored", site.id,
        repairs.long_calls, n));
  if (repairs.bad_delays)
    out.warnings.push_back(fmt::format(
        "{}: {} negative or non-finite first-touch delay(s) ignored", site.id, repairs.bad_delays));
  if (repairs.bad_tcomm)
    out.warnings.push_back(fmt::format("{}: {} negative or non-finite Tcomm value(s) ignored",
                                       site.id, repairs.bad_tcomm));
  return out;
}

}  // namespace tnbc::priority
