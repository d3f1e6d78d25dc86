/* Preloaded into every rank by tnbc-cluster (only there): a finalize-hang workaround.
 *
 * MPICH 4.0.2 (ch4:ucx) calls ucp_disconnect_nb() on every endpoint in MPI_Finalize and polls
 * until all complete, and only then enters the PMI barrier.  With UCX 1.13's TCP transport a
 * disconnect sends a flush that completes only while the peer still polls; a peer that already
 * entered the PMI barrier never does, so ranks spin forever (cf. openucx/ucx#8738).  Returning
 * NULL ("completed") skips the flush; the worker and its endpoints are destroyed after the
 * barrier anyway.  docs/cluster.md has the measurements. */
#include <stddef.h>
#include <ucp/api/ucp.h>

ucs_status_ptr_t ucp_disconnect_nb(ucp_ep_h ep) {
  (void)ep;
  return NULL;
}
