/*
 * HeteroSim: an output-queued switch of the RDMA fabric (leaf, spine, NVSwitch, PCIe switch).
 */
#ifndef HETEROSIM_RDMA_SWITCH_H
#define HETEROSIM_RDMA_SWITCH_H

#include "load-balancer.h"
#include "red-ecn-marker.h"
#include "switch-mmu.h"

#include "ns3/event-id.h"
#include "ns3/frame-handler.h"
#include "ns3/object.h"
#include "ns3/qbb-net-device.h"
#include "ns3/rdma-frame-pool.h"
#include "ns3/topology-description.h"

#include <cstdint>
#include <vector>

namespace ns3
{

/**
 * \brief Switch node logic: ECMP forwarding over TopologyDescription next hops, per-priority
 * output queues on its QbbNetDevices, shared-buffer admission and PFC through a SwitchMmu,
 * RED ECN marking through a RedEcnMarker, and INT stamping for HPCC.
 *
 * Forwarding: the next-hop set towards the frame's destination node comes from a dense table
 * built once from TopologyDescription::GetNextHops; among several, the port is
 * TopologyDescription::EcmpIndex(frame hash, hop, n), the same choice GetPath() makes, so
 * packets follow the paths the flow model computes. With a LoadBalancer (SetLoadBalancer),
 * RDMA data frames pick among several ports by its mode instead (flowlets, adaptive routing,
 * spraying); control and IP frames keep the ECMP choice. Control frames (ACK, NACK, CNP) use the
 * strict control queue and bypass buffer accounting and marking.
 */
class RdmaSwitch : public Object, public FrameHandler
{
  public:
    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    RdmaSwitch();
    ~RdmaSwitch() override;

    /**
     * \brief Wire the switch up.
     * \param nodeId topology node id of this switch
     * \param desc the topology
     * \param ports devices, in port order
     * \param portLinks topology link of each port
     * \param pool frame allocator
     * \param mmu buffer manager (configured here)
     * \param marker ECN marker, or nullptr for no marking
     * \param bufferBytes switch buffer, bytes
     * \param pfcEnabled lossless buffer
     * \param intEnabled push INT records (HPCC)
     * \param maxFrameBytes largest data frame on the wire, bytes (headroom sizing)
     */
    void Setup(uint32_t nodeId,
               Ptr<TopologyDescription> desc,
               const std::vector<Ptr<QbbNetDevice>>& ports,
               const std::vector<uint32_t>& portLinks,
               RdmaFramePool* pool,
               Ptr<SwitchMmu> mmu,
               Ptr<RedEcnMarker> marker,
               uint64_t bufferBytes,
               bool pfcEnabled,
               bool intEnabled,
               uint32_t maxFrameBytes);

    void HandleFrame(RdmaFrame* frame, uint32_t port) override;
    void OnDequeue(RdmaFrame* frame, uint32_t port) override;

    /**
     * \brief Rebuild the forwarding table from the topology's current next hops (after a link
     * went down or came back: TopologyDescription::RecomputeFabricRoutes). A destination the
     * topology no longer reaches from here keeps its previous ports, so its frames go on to the
     * down link and are dropped there, as on a real switch before its routes converge.
     */
    void UpdateRoutes();

    /**
     * \brief Let \p lb choose the egress of RDMA data frames among equal-cost ports (null:
     * ECMP by hash, the default).
     * \param lb the balancer
     * \param stream its random stream (run seed and node id)
     */
    void SetLoadBalancer(Ptr<LoadBalancer> lb, uint64_t stream);
    /** \return the load balancer (null: ECMP) */
    Ptr<LoadBalancer> GetLoadBalancer() const;

    /** \return the buffer manager */
    Ptr<SwitchMmu> GetMmu() const;
    /** \return packets dropped at this switch */
    uint64_t GetDrops() const;
    /** \param port a port \return its PFC headroom, bytes */
    uint64_t GetHeadroom(uint32_t port) const;

  protected:
    void DoDispose() override;

  private:
    /** Fill the forwarding table from m_desc (keeping old sets of unreachable destinations). */
    void BuildForwarding();
    /** Send XOFF or XON to the upstream of (port, priority) as the MMU asks. */
    void CheckPause(uint32_t port, uint8_t priority);
    /** Re-send XOFF before the previous one expires. */
    void RefreshPause(uint32_t port, uint8_t priority);

    uint32_t m_nodeId{0};                           //!< topology node
    Ptr<TopologyDescription> m_desc;                //!< topology (routes)
    std::vector<uint32_t> m_portLinks;              //!< topology link of each port
    std::vector<Ptr<QbbNetDevice>> m_ports;         //!< devices
    RdmaFramePool* m_pool{nullptr};                 //!< frame allocator
    Ptr<SwitchMmu> m_mmu;                           //!< buffer manager
    Ptr<RedEcnMarker> m_marker;                     //!< ECN marker (may be null)
    Ptr<LoadBalancer> m_lb;                         //!< non-ECMP choice (may be null)
    bool m_int{false};                              //!< INT stamping on
    std::vector<int32_t> m_dstSlot;                 //!< node -> slot in m_nextPorts, -1 none
    std::vector<std::vector<uint16_t>> m_nextPorts; //!< ECMP port sets
    std::vector<uint64_t> m_headroom;               //!< headroom per port
    std::vector<EventId> m_refresh;                 //!< XOFF refresh per (port, priority)
    uint64_t m_drops{0};                            //!< drops here
};

} // namespace ns3

#endif /* HETEROSIM_RDMA_SWITCH_H */
