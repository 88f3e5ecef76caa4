/*
 * HeteroSim: the packet-level RDMA network behind the FlowNetwork interface.
 */
#ifndef HETEROSIM_PACKET_NETWORK_H
#define HETEROSIM_PACKET_NETWORK_H

#include "ns3/flow-network.h"
#include "ns3/fluid-network.h"
#include "ns3/node.h"
#include "ns3/nstime.h"
#include "ns3/packet-episode-cache.h"
#include "ns3/packet-fast-forward.h"
#include "ns3/packet-network-builder.h"
#include "ns3/packet-network-sampler.h"
#include "ns3/qbb-net-device.h"
#include "ns3/rdma-frame-pool.h"
#include "ns3/rdma-nic.h"
#include "ns3/rdma-queue-pair.h"
#include "ns3/rdma-switch.h"
#include "ns3/socket-transport.h"
#include "ns3/topology-description.h"
#include "ns3/type-id.h"

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace ns3
{

/**
 * \brief Packet-level RDMA network built from a TopologyDescription: the FlowNetwork the
 * PlanExecutor drives (flows and messages of connections start here, their completions are
 * reported back), its queue pairs, and faults on its links.
 *
 * Its parts, one job each: PacketNetworkBuilder holds the component factories and assembles
 * the fabric (one ns3::Node per topology node, a QbbChannel with two QbbNetDevices per link,
 * an RdmaNic on GPU and NIC nodes, an RdmaSwitch with its SwitchMmu everywhere else; leaf and
 * spine switches use the configured buffer, PFC setting and ECN marker (INT stamping with
 * HPCC), NVSwitch and PCIe switch/root nodes are lossless, never mark and use HostBufferSize).
 * PacketNetworkSampler records the queue and rate series (SampleInterval);
 * PacketNetworkStats copies counters, the port table, per-flow counters and the series into
 * arrays. PacketFastForward (Acceleration=fast) skips settled stretches.
 *
 * A flow between GPUs of one host runs GPU to GPU over the host links (no NIC) with no
 * congestion control. Its frames carry payload only and its acknowledgements are empty: host
 * link rates are data rates already (NVLink at NCCL's effective rate), so Ethernet/RoCEv2
 * headers there would count the protocol overhead twice. A flow between hosts runs as a queue pair
 * from the source GPU's NIC to the destination GPU's NIC with the selected congestion control. The
 * GPUDirect PCIe segments (GPU -> NIC, NIC -> GPU) are modelled as a rate constraint and a latency,
 * not packet by packet: the queue pair's maximum rate is the smallest of the NIC port rate and the
 * rates of the host links on both segments, the queue pair starts after the source segment's
 * latency and the flow completes after the destination segment's latency, where a segment's latency
 * is the sum over its links of propagation delay plus one maximum-size frame's serialisation.
 * Consequence: PCIe links carry only intra-host traffic in this model, and several NICs
 * behind one PCIe switch do not contend for its upstream link.
 *
 * HostFlows = "fluid" hands flows between GPUs of one host to a FluidNetwork on the same
 * topology instead (max-min rates on the host links, no frames). Since host links carry only
 * intra-host flows in this model (see above), the two models share no link and nothing couples
 * them; what changes is the intra-host model only (no NVSwitch queues or per-frame round robin,
 * see fluid-network.h), and the packet events of NVLink/PCIe copies are saved. Port counters
 * then add the fluid model's bytes on host links (frames stay 0 there: none were simulated).
 *
 * Socket hosts (TopologyDescription::SetHostTransports): a flow between two hosts where
 * either end is a socket host is carried by a SocketTransport (NCCL's socket transport over
 * ns-3's TCP on the same devices and switches) instead of a queue pair, with the same host
 * segment latencies; with PFC on, the TCP traffic class stays lossy unless
 * SocketTransport::TcpLossless is set. Networks without socket hosts create none of it.
 *
 * LoadBalancing other than "ecmp" gives every leaf and spine switch a LoadBalancer of that
 * mode (flowlets, adaptive routing, packet spraying); its attributes (FlowletGap) are set as
 * "LoadBalancer::...". A run that may reorder packets or recovers selectively
 * (RdmaNic::Transport=irn) is never fast-forwarded or memoized: both assume every queue pair
 * on one path with go-back-N state.
 *
 * Flows are hashed for ECMP from (Seed, flow id, source GPU, destination GPU), messages of a
 * connection from (Seed, connection id, source GPU, destination GPU); ECN marking
 * uses its own random streams, so the seed changes ECMP choices only.
 */
class PacketNetwork : public FlowNetwork
{
  public:
    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    PacketNetwork();
    ~PacketNetwork() override;

    /**
     * \brief Set an attribute of the network or of a component it creates (RdmaNic,
     * SwitchMmu, RedEcnMarker, Dcqcn, Hpcc, Timely, Dctcp, NoCongestionControl,
     * PacketFastForward, SocketTransport: PacketNetworkBuilder's factories) by name, before
     * Build().
     * A plain name sets it on every component that has it; "Class::Name" on that class only.
     * \param name attribute name
     * \param value value as text (ns-3 syntax, e.g. "50us", "25Gbps", "true")
     * \return false if no component has the attribute or the value does not parse
     */
    bool SetComponentAttribute(std::string name, std::string value);

    /**
     * \brief Build nodes, devices, channels, switches and endpoints (PacketNetworkBuilder),
     * the transports and models the topology needs, and the sampler.
     * \param desc the topology
     * \return false if the Cc attribute names no congestion-control class, HostFlows is neither
     * "packet" nor "fluid", LoadBalancing names no mode, or SocketTransport::TcpCongestionControl
     * names no TCP congestion control while socket hosts exist
     */
    bool Build(Ptr<TopologyDescription> desc);

    void StartFlow(uint32_t flowId,
                   uint32_t srcGpu,
                   uint32_t dstGpu,
                   uint64_t bytes,
                   uint8_t priority) override;
    /**
     * \brief Post a message on a connection: it is appended to the connection's queue pair
     * while that one still has bytes to send or acknowledge, else it opens a new queue pair
     * (congestion control starting afresh, as for a new flow). The queue pair's ECMP hash is
     * the connection's. Intra-host connections with HostFlows=fluid go to the fluid network's
     * connections.
     */
    void StartFlowOnConnection(uint32_t flowId,
                               uint32_t srcGpu,
                               uint32_t dstGpu,
                               uint64_t bytes,
                               uint8_t priority,
                               uint32_t connection) override;
    uint32_t GetNGpus() const override;
    /**
     * \brief Take a fabric link down or bring it back (fault): both ports drop what they hold
     * and stop (QbbNetDevice::SetLinkDown); until Reroute() the switches still forward into
     * it, and those frames are dropped there. Frames lost are recovered by the transport (NACK
     * or retransmission timeout, go-back-N).
     */
    void SetLinkUp(uint32_t link, bool up) override;
    /**
     * \brief Recompute the topology's fabric routes over the links that are up and rebuild
     * every switch's forwarding table, so ECMP re-hashes frames over the paths left.
     * \return number of unfinished queue pairs whose path changed
     */
    uint32_t Reroute() override;
    /** \brief Degrade (or restore) a link's rate, both ports, from now on. */
    void SetLinkRate(uint32_t link, double rateBps) override;
    /** \brief Drop frames arriving over the link with \p probability (each port its own
     * random stream); \p goodputFactor is for fluid models and unused here. */
    void SetLinkLoss(uint32_t link, double probability, double goodputFactor) override;
    /** \return frames dropped by faults on link \p link (both directions) */
    uint64_t GetLinkFaultDrops(uint32_t link) const;
    /** \return messages appended to a queue pair that was already carrying another */
    uint64_t GetMessagesQueued() const;

    /**
     * \brief Stop the simulator once \p n flows have finished (0 = never); for stand-alone runs
     * so that the run ends at the last completion rather than at its time limit.
     * \param n number of flows
     */
    void SetStopAfterFlows(uint64_t n);

    /** \return number of ports (2 per link: port 2*l is link l's a->b direction) */
    uint32_t GetNPorts() const;
    /** \return the device of port \p port (null if out of range) */
    Ptr<QbbNetDevice> GetPortDevice(uint32_t port) const;
    /** \return the topology the network was built on (null before Build()) */
    Ptr<TopologyDescription> GetTopology() const;

    /** \return number of queue pairs (flows that needed the network) */
    uint32_t GetNQueuePairs() const;
    /** \return the queue pair of slot \p slot (0 .. GetNQueuePairs()-1, in start order) */
    const RdmaQueuePair* GetQueuePair(uint32_t slot) const;
    /** \return the queue pair that carries flow \p flowId (null if none did) */
    const RdmaQueuePair* FindQueuePair(uint32_t flowId) const;
    /**
     * \brief Bytes of flow \p flowId's own message acknowledged and delivered in order so far
     * (for a message of a connection, the part of its queue pair's byte stream that is its own,
     * bytes skipped by fast-forward included).
     * \param flowId flow id
     * \param acked bytes acknowledged
     * \param delivered bytes delivered in order at the receiver
     * \return false (and zeros) if no queue pair carries the flow
     */
    bool GetMessageProgress(uint32_t flowId, uint64_t* acked, uint64_t* delivered) const;
    /** \return flows started (StartFlow and StartFlowOnConnection calls) */
    uint64_t GetFlowsStarted() const;
    /** \return bytes of the flows started */
    uint64_t GetBytesStarted() const;

    /** \return smallest shared pool of a fabric switch, bytes (0: buffer too small) */
    uint64_t GetSmallestSharedPool() const;
    /** \return frames handed out by the frame pool now (in flight or queued) */
    uint64_t GetFramesInUse() const;
    /** \return the congestion controller of flow \p flowId (null if unknown) */
    Ptr<RdmaCongestionControl> GetFlowCc(uint32_t flowId) const;
    /** \return the fluid network that carries intra-host flows (null unless HostFlows=fluid) */
    Ptr<FluidNetwork> GetHostFluid() const;
    /** \return the socket transport of socket hosts (null when every host uses RDMA) */
    Ptr<SocketTransport> GetSocketTransport() const;
    /** \return the steady-state fast-forward (null unless Acceleration=fast) */
    Ptr<PacketFastForward> GetFastForward() const;
    /** \return the episode cache (null unless Acceleration is memo or fast+memo) */
    Ptr<PacketEpisodeCache> GetEpisodeCache() const;
    /** \return the sampler of queues and rates (SampleInterval) */
    const PacketNetworkSampler& GetSampler() const;
    /** \return the path links of a flow as routed (empty if unknown) */
    std::vector<uint32_t> GetFlowPath(uint32_t flowId) const;

  protected:
    void DoDispose() override;

  private:
    friend class PacketFastForward;  //!< reads and advances queue pairs and ports
    friend class PacketEpisodeCache; //!< records and replays queue pairs and ports

    /** Start a flow, or a message on \p connection (-1: none). */
    void StartMessage(uint32_t flowId,
                      uint32_t srcGpu,
                      uint32_t dstGpu,
                      uint64_t bytes,
                      uint8_t priority,
                      int64_t connection);
    /** Where a message between hosts or inside one goes: its ends, hashes, path and the part
     * of the path the transport carries (the rest are host segments: latency and a rate cap). */
    struct MessageRoute
    {
        uint32_t hash{0};           //!< ECMP hash of the data direction
        uint32_t ackHash{0};        //!< ECMP hash of the ACK direction
        uint32_t srcEp{0};          //!< sending endpoint node (its NIC between hosts)
        uint32_t dstEp{0};          //!< receiving endpoint node
        std::vector<uint32_t> path; //!< links GPU to GPU (empty: no route)
        std::size_t first{0};       //!< first link of the transport part
        std::size_t last{0};        //!< one past its last link
        int64_t srcDelayNs{0};      //!< host segments before the transport part
        int64_t dstDelayNs{0};      //!< host segments after it
        double capBps{0};           //!< slowest host segment (infinity: none)
    };

    /** Start an intra-host message on the fluid host model (HostFlows=fluid). */
    void StartOnHostFluid(uint32_t flowId,
                          uint32_t srcGpu,
                          uint32_t dstGpu,
                          uint64_t bytes,
                          uint8_t priority,
                          int64_t connection);
    /** Append a message to the open queue pair of \p connection; \return false if it has none
     * (tells the episode cache either way). */
    bool AppendToConnection(uint32_t flowId, uint64_t bytes, uint8_t priority, uint32_t connection);
    /** ECMP hashes, endpoints and path of a new message (path empty while a fault cuts it). */
    MessageRoute RouteMessage(uint32_t flowId,
                              uint32_t srcGpu,
                              uint32_t dstGpu,
                              uint32_t srcNode,
                              uint32_t dstNode,
                              bool sameHost,
                              int64_t connection) const;
    /** Fill the transport part of \p route and its host segments' delays and rate cap. */
    void SplitHostSegments(MessageRoute& route, bool sameHost) const;
    /** \return the unloaded round trip of the transport part of \p route, ns */
    int64_t TransportRttNs(const MessageRoute& route) const;
    /** Create, register and schedule the queue pair of a new message along \p route. */
    void OpenQueuePair(uint32_t flowId,
                       uint64_t bytes,
                       uint8_t priority,
                       int64_t connection,
                       bool sameHost,
                       const MessageRoute& route);
    /** The receiver got every byte of message \p flowId of queue pair \p slot. */
    void Delivered(uint32_t slot, uint32_t flowId);
    /** Report a flow done. */
    void Finish(uint32_t flowId);
    /** An intra-host flow carried by the fluid network finished. */
    void HostFlowDone(uint32_t flowId, Time when);
    /** \return true while flows are unfinished (the sampler goes on) */
    bool HasPendingFlows() const;
    /** \return whether the attributes name known choices (Cc, HostFlows, Acceleration,
     * LoadBalancing); hands LoadBalancing to the builder. */
    bool CheckSettings();
    /** Create the socket transport where the topology has socket hosts; \return false if its
     * TcpCongestionControl names no TCP congestion control. */
    bool CreateSocketTransport(Ptr<TopologyDescription> desc);
    /** Create the fluid model of intra-host flows (HostFlows=fluid). */
    void CreateHostFluid(Ptr<TopologyDescription> desc);
    /** \return the wire bytes of a frame beyond its own (IncludePhyOverhead) */
    uint32_t PhyBytes() const;
    /** Set the frame sizes for the congestion control \p ccProbe and build nodes, ports,
     * NICs and switches. */
    void BuildFabric(Ptr<TopologyDescription> desc, Ptr<RdmaCongestionControl> ccProbe);
    /** Set the socket transport (if any) up on the built fabric and pass it the NICs' IP frames. */
    void ConnectSocketTransport(Ptr<TopologyDescription> desc);
    /** Create the episode cache if Acceleration asks for it and \p plain (ECMP, go-back-N)
     * and no socket hosts share the fabric. */
    void AttachEpisodeCache(Ptr<TopologyDescription> desc, bool plain);
    /** Create the fast-forward if Acceleration asks for it; it skips only when \p plain (ECMP,
     * go-back-N) and the congestion control and hosts allow. */
    void AttachFastForward(Ptr<TopologyDescription> desc, bool plain);
    /** Local port of \p node on \p link. */
    uint32_t PortOf(uint32_t node, uint32_t link) const;

    // attributes
    TypeId m_ccType;            //!< congestion control class (a child of RdmaCongestionControl)
    uint32_t m_mtu;             //!< payload per packet
    bool m_pfc;                 //!< PFC on fabric switches
    uint64_t m_buffer;          //!< fabric switch buffer
    uint64_t m_hostBuffer;      //!< host switch buffer
    bool m_ecn;                 //!< ECN marking on fabric switches
    uint32_t m_seed;            //!< ECMP, ECN marking and loss seed
    bool m_ecmp;                //!< per-flow ECMP (else every flow takes the first choice)
    std::string m_balancing;    //!< ecmp, or a LoadBalancer mode of leaf/spine switches
    Time m_sampleInterval;      //!< 0 = no sampling
    bool m_sampleAllPorts;      //!< sample every port (else fabric ports only)
    bool m_phyOverhead;         //!< count preamble + IFG
    std::string m_hostFlows;    //!< intra-host flow model: packet or fluid
    std::string m_acceleration; //!< exact, fast, memo or fast+memo

    PacketNetworkBuilder m_builder;           //!< component factories, fabric assembly
    Ptr<PacketFastForward> m_ff;              //!< fast-forward (Acceleration=fast)
    Ptr<PacketEpisodeCache> m_memo;           //!< episode memoization (memo, fast+memo)
    Ptr<SocketTransport> m_socket;            //!< TCP between hosts where one end is a socket host
    Ptr<TopologyDescription> m_desc;          //!< topology
    Ptr<FluidNetwork> m_hostFluid;            //!< intra-host flows (HostFlows=fluid)
    Ptr<RdmaFramePool> m_pool;                //!< frames
    std::vector<Ptr<Node>> m_nodes;           //!< one per topology node
    std::vector<Ptr<QbbNetDevice>> m_portDev; //!< global port -> device
    std::vector<std::vector<uint32_t>> m_nodePorts; //!< node -> global ports (local order)
    std::vector<Ptr<RdmaNic>> m_nics;               //!< node -> endpoint (or null)
    std::vector<Ptr<RdmaSwitch>> m_switches;        //!< node -> switch (or null)
    RdmaFrameSizes m_sizes;                         //!< frame sizes
    uint32_t m_maxFrame{0};                         //!< largest data frame

    std::vector<std::unique_ptr<RdmaQueuePair>> m_qps; //!< by slot
    std::unordered_map<uint32_t, uint32_t> m_slotOf;   //!< flow id -> slot
    std::unordered_map<uint32_t, uint32_t> m_connSlot; //!< connection -> its latest queue pair
    /** flow id -> (first byte, bytes) in its queue pair, for messages of connections */
    std::unordered_map<uint32_t, std::pair<uint64_t, uint64_t>> m_msgSpan;
    /** flow id -> payload bytes of the message carried by fast-forward (removed from its span) */
    std::unordered_map<uint32_t, uint64_t> m_msgFf;
    uint64_t m_messagesQueued{0}; //!< messages appended to a busy queue pair
    uint64_t m_flows{0};          //!< flows started
    uint64_t m_bytes{0};          //!< bytes of flows started
    uint64_t m_pending{0};        //!< flows not finished
    uint64_t m_stopAfter{0};      //!< stop after this many finished

    /** A message started while no route joined its ends (a link fault), started again by
     * Reroute(). */
    struct UnroutedMessage
    {
        uint32_t flowId;    //!< flow id
        uint32_t srcGpu;    //!< sending GPU
        uint32_t dstGpu;    //!< receiving GPU
        uint64_t bytes;     //!< payload bytes
        uint8_t priority;   //!< priority class
        int64_t connection; //!< connection (-1: none)
    };

    std::vector<UnroutedMessage> m_unrouted; //!< messages waiting for a route, in start order

    PacketNetworkSampler m_sampler; //!< queue and rate series (SampleInterval)
};

} // namespace ns3

#endif /* HETEROSIM_PACKET_NETWORK_H */
