/*
 * HeteroSim: a two-leaf, several-spine topology (equal-cost paths) for examples and tests.
 */
#ifndef HETEROSIM_TWO_TIER_TOPOLOGY_HELPER_H
#define HETEROSIM_TWO_TIER_TOPOLOGY_HELPER_H

#include "ns3/nstime.h"
#include "ns3/ptr.h"
#include "ns3/topology-description.h"

#include <cstdint>

namespace ns3
{

/**
 * \brief Builds a TopologyDescription of two leaf switches joined through \c spines spine
 * switches, with \c hostsPerLeaf single-GPU hosts on each leaf: traffic between the leaves
 * has one equal-cost path per spine.
 *
 * Host h (0 .. 2 * hostsPerLeaf - 1, on leaf h / hostsPerLeaf) has GPU h (node 2h) and its
 * NIC (node 2h + 1), joined by a PCIe link (link 2h); its access link to its leaf is link
 * 2h + 1. Leaf l is node 4 * hostsPerLeaf + l, spine s node 4 * hostsPerLeaf + 2 + s; the
 * uplink of leaf l to spine s is link GetUplink(l, s). Every link has the same delay; access
 * links and uplinks the same rate.
 *
 * A topology written by hand for C++ examples and TestSuites; heterosim.engine.topology builds
 * the clusters of experiment files.
 */
class TwoTierTopologyHelper
{
  public:
    /**
     * \param hostsPerLeaf hosts on each leaf (>= 1)
     * \param spines spine switches (>= 1)
     * \param rateBps access link and uplink rate, bit/s per direction
     * \param pcieRateBps GPU-NIC link rate, bit/s per direction
     * \param linkDelay propagation delay of every link
     */
    TwoTierTopologyHelper(
        uint32_t hostsPerLeaf, uint32_t spines, double rateBps, double pcieRateBps, Time linkDelay);

    /** \return a new description of the topology */
    Ptr<TopologyDescription> Create() const;

    /** \param leaf 0 or 1 \param spine a spine \return the link joining them */
    uint32_t GetUplink(uint32_t leaf, uint32_t spine) const;

  private:
    /** Give \p desc the nodes, links and GPUs of the topology (no routes yet). */
    void DescribeNodesAndLinks(Ptr<TopologyDescription> desc) const;
    /** Give \p desc the routes of the topology (its nodes and links set). */
    void DescribeRoutes(Ptr<TopologyDescription> desc) const;

    uint32_t m_hostsPerLeaf; //!< hosts on each leaf
    uint32_t m_spines;       //!< spine switches
    double m_rate;           //!< access links and uplinks, bit/s
    double m_pcieRate;       //!< GPU-NIC links, bit/s
    Time m_delay;            //!< every link
};

} // namespace ns3

#endif /* HETEROSIM_TWO_TIER_TOPOLOGY_HELPER_H */
