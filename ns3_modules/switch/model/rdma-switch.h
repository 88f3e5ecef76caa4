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
#include "ns3/traced-callback.h"

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
 *
 * Packet trimming (Trimming, off by default): a switch with a lossy buffer (PFC off) that would
 * drop an RDMA data frame because the shared buffer has no room for it cuts the frame to its
 * header instead (TrimBytes, plus the physical-layer overhead of SetPhyBytes) and forwards the
 * header in the strict control queue, ahead of all data, unaccounted; later switches forward a
 * trimmed frame the same way, and the receiving endpoint answers it with a NACK at once
 * (RdmaNic UetTrimming). This is the trimming of NDP (Handley et al., "Re-architecting
 * datacenter networks and stacks for low latency and high performance", SIGCOMM 2017:
 * cut the payload when the data queue is full, headers in a priority queue) that UET 1.0 makes
 * an optional switch feature (Ultra Ethernet Consortium, "Ultra Ethernet Specification 1.0",
 * 2025, packet trimming in the network layer; the UEC reference simulator htsim models it the
 * same way). Only RDMA data frames are trimmed (IP frames of socket hosts are dropped as before).
 * APPROXIMATION: the header queue is unbounded (NDP and UET drop headers too when it overflows;
 * the header rate is 1/20 of the data rate at a 1500-byte MTU, so it does not fill in the
 * scenarios modelled), and headers are not ECN-marked or INT-stamped.
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
    /** \return data packets trimmed to their header at this switch */
    uint64_t GetTrims() const;
    /** \return whether this switch trims (Trimming on and its buffer lossy) */
    bool IsTrimming() const;
    /**
     * \brief Set the physical-layer bytes a frame occupies on the wire beyond its Ethernet
     * frame (preamble, SFD, inter-frame gap), added to TrimBytes for a trimmed frame.
     * \param bytes overhead, bytes
     */
    void SetPhyBytes(uint32_t bytes);

    /**
     * TracedCallback signature for a trimmed frame.
     * \param frame the frame, already cut to its header
     * \param port egress port it is queued on
     */
    typedef void (*TrimTracedCallback)(const RdmaFrame* frame, uint32_t port);
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
    /** Cut a data frame the buffer cannot admit to its header and queue it ahead of data. */
    void Trim(RdmaFrame* frame, QbbNetDevice* egress, uint32_t out);

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
    bool m_trimming{false};                         //!< Trimming attribute
    bool m_trimActive{false};                       //!< trimming on and the buffer lossy
    uint32_t m_trimBytes{64};                       //!< TrimBytes attribute
    uint32_t m_phyBytes{0};                         //!< wire overhead beyond the frame
    uint64_t m_trims{0};                            //!< data frames trimmed here
    TracedCallback<const RdmaFrame*, uint32_t> m_trimTrace; //!< a frame was trimmed
};

} // namespace ns3

#endif /* HETEROSIM_RDMA_SWITCH_H */
