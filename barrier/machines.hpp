// The NUMA distance matrices of the seed paper's machines (numactl -H), for the unit tests and
// the cost-model benchmark (bench/bench_barrier.cpp) -- written once here.
#pragma once

#include <vector>

namespace tnbc::barrier::machines {

// Kurnosov & Tokmasheva 2020, figure 1: 2 x AMD EPYC, 4 dies per socket (8 NUMA nodes).
inline const std::vector<std::vector<int>> kEpyc = {
    {10, 16, 16, 16, 28, 28, 22, 28}, {16, 10, 16, 16, 28, 28, 28, 22},
    {16, 16, 10, 16, 22, 28, 28, 28}, {16, 16, 16, 10, 28, 22, 28, 28},
    {28, 28, 22, 28, 10, 16, 16, 16}, {28, 28, 28, 22, 16, 10, 16, 16},
    {22, 28, 28, 28, 16, 16, 10, 16}, {28, 22, 28, 28, 16, 16, 16, 10}};
// 2 sockets, one NUMA node each.
inline const std::vector<std::vector<int>> kIntel2 = {{10, 21}, {21, 10}};
// Figure 2: 2 x Intel Cascade Lake with Sub-NUMA Clustering (nodes 0, 2 on socket 0).
inline const std::vector<std::vector<int>> kCascadeSnc = {
    {10, 21, 11, 21}, {21, 10, 21, 11}, {11, 21, 10, 21}, {21, 11, 21, 10}};

}  // namespace tnbc::barrier::machines
