// Shapes shared by the tree algorithms.  Trees are built on virtual ranks v = (rank - root)
// mod size, so the chosen root (MinNumaDist) is the root of every tree; v = 0 is the root.
#pragma once

namespace tnbc::barrier {

inline int to_virtual(int rank, int root, int size) { return (rank - root + size) % size; }
inline int to_real(int v, int root, int size) { return (v + root) % size; }

/// Complete k-ary tree on 0..size-1 in breadth-first order: parent of v > 0 is (v-1)/k, the
/// children of v are k*v+1 .. k*v+k (those < size), and v is child number (v-1)%k.
struct KaryTree {
  int arity;
  int size;
  int parent(int v) const { return (v - 1) / arity; }
  int slot(int v) const { return (v - 1) % arity; }
  int first_child(int v) const { return arity * v + 1; }
  int child_count(int v) const {
    int first = first_child(v);
    if (first >= size) return 0;
    return first + arity <= size ? arity : size - first;
  }
};

}  // namespace tnbc::barrier
