/*
 * HeteroSim: a one-switch topology for examples and tests.
 */
#ifndef HETEROSIM_STAR_TOPOLOGY_HELPER_H
#define HETEROSIM_STAR_TOPOLOGY_HELPER_H

#include "ns3/nstime.h"
#include "ns3/ptr.h"
#include "ns3/topology-description.h"

#include <cstdint>

namespace ns3
{

/**
 * \brief Builds a TopologyDescription of \c hosts single-GPU hosts around one leaf switch.
 *
 * Host h has GPU h (node 2h) and its NIC (node 2h + 1), joined by a PCIe link (link 2h); the
 * NIC's access link to the leaf (node 2 * hosts) is link 2h + 1. Every link has the same
 * propagation delay. Routes are the only paths: GPU <-> its NIC, NIC -> leaf -> NIC.
 *
 * A topology written by hand for C++ examples and TestSuites; heterosim.engine.topology builds
 * the clusters of experiment files.
 */
class StarTopologyHelper
{
  public:
    /**
     * \param hosts number of hosts (>= 2)
     * \param nicRateBps NIC and access-link rate, bit/s per direction
     * \param pcieRateBps GPU-NIC link rate, bit/s per direction
     * \param linkDelay propagation delay of every link
     */
    StarTopologyHelper(uint32_t hosts, double nicRateBps, double pcieRateBps, Time linkDelay);

    /** \return a new description of the topology */
    Ptr<TopologyDescription> Create() const;

    /** \return the leaf switch's node id */
    uint32_t GetLeafNode() const;

  private:
    uint32_t m_hosts;  //!< hosts (= GPUs = NICs)
    double m_nicRate;  //!< access links, bit/s
    double m_pcieRate; //!< GPU-NIC links, bit/s
    Time m_delay;      //!< every link
};

} // namespace ns3

#endif /* HETEROSIM_STAR_TOPOLOGY_HELPER_H */
