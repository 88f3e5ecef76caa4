/*
 * HeteroSim: the component factories of the packet network and the assembly of its fabric.
 */
#ifndef HETEROSIM_PACKET_NETWORK_BUILDER_H
#define HETEROSIM_PACKET_NETWORK_BUILDER_H

#include "ns3/callback.h"
#include "ns3/node.h"
#include "ns3/object-factory.h"
#include "ns3/packet-episode-cache.h"
#include "ns3/packet-fast-forward.h"
#include "ns3/qbb-net-device.h"
#include "ns3/rdma-congestion-control.h"
#include "ns3/rdma-frame-pool.h"
#include "ns3/rdma-nic.h"
#include "ns3/rdma-queue-pair.h"
#include "ns3/rdma-switch.h"
#include "ns3/socket-transport.h"
#include "ns3/topology-description.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ns3
{

/**
 * \brief The ns-3 objects of one packet network's fabric, as PacketNetworkBuilder::Build
 * creates them.
 */
struct PacketFabric
{
    std::vector<Ptr<Node>> nodes;                 //!< one per topology node
    std::vector<Ptr<QbbNetDevice>> portDev;       //!< global port -> device (port 2*l: a->b)
    std::vector<std::vector<uint32_t>> nodePorts; //!< node -> global ports (local order)
    std::vector<Ptr<RdmaNic>> nics;               //!< node -> endpoint (or null)
    std::vector<Ptr<RdmaSwitch>> switches;        //!< node -> switch (or null)
};

/**
 * \brief Settings of the fabric PacketNetworkBuilder::Build assembles (the PacketNetwork's
 * attributes and what the chosen congestion control needs of the switches).
 */
struct PacketFabricSettings
{
    uint32_t mtu{4096};           //!< RDMA payload bytes per packet
    uint32_t seed{1};             //!< the run's seed: selects the ECN markers' random streams
    bool pfc{true};               //!< PFC on leaf and spine switches
    uint64_t buffer{0};           //!< shared buffer of each leaf/spine switch, bytes
    uint64_t hostBuffer{0};       //!< buffer of each NVSwitch / PCIe switch / root, bytes
    bool ecn{true};               //!< ECN marking at leaf/spine egress queues
    uint32_t phyBytes{0};         //!< preamble/SFD + inter-frame gap counted per frame
    bool stampInt{false};         //!< leaf/spine switches stamp INT records (HPCC)
    RdmaFrameSizes sizes;         //!< frame sizes of NIC queue pairs
    uint32_t maxFrame{0};         //!< largest data frame, bytes
    bool balance{false};          //!< leaf/spine switches get a LoadBalancer (not ECMP)
    RdmaFramePool* pool{nullptr}; //!< frames (owned by the network)
    const std::vector<std::unique_ptr<RdmaQueuePair>>* qps{nullptr}; //!< queue-pair table
    Callback<void, uint32_t, uint32_t> delivered; //!< RdmaNic: a message was delivered
};

/**
 * \brief Builds the fabric of a PacketNetwork from a TopologyDescription and creates the
 * components it configures: an ns-3 helper in the manner of PointToPointHelper.
 *
 * Holds one ObjectFactory per component class (RdmaNic, RdmaSwitch, SwitchMmu, RedEcnMarker,
 * PacketFastForward, PacketEpisodeCache, SocketTransport, LoadBalancer and every registered
 * RdmaCongestionControl subclass), so attributes set by name before Build() reach every object
 * created afterwards.
 *
 * Build(): one ns3::Node per topology node; each topology link is a QbbChannel joining two
 * QbbNetDevices with the link's rate and delay (global ports 2*l and 2*l+1 for link l's A and
 * B ends). GPU and NIC nodes get an RdmaNic (GPU endpoints carry intra-host copies only:
 * payload-only frames, empty ACKs, always lossless); every other node gets an RdmaSwitch with
 * its own SwitchMmu. Leaf and spine switches use the configured buffer, PFC setting and ECN
 * marker (INT stamping when the congestion control asks for it); NVSwitch and PCIe
 * switch/root nodes are lossless, never mark and use the host buffer.
 */
class PacketNetworkBuilder
{
  public:
    PacketNetworkBuilder();

    /** What SetComponentAttribute found. */
    enum SetResult
    {
        NOT_FOUND, //!< no component class has the attribute
        SET,       //!< set on every matching class
        INVALID,   //!< a matching class rejected the value (classes before it keep theirs)
    };

    /**
     * \brief Set an attribute of the components the builder creates.
     * \param cls class TypeId name ("ns3::Dcqcn"), or empty for every class that has \p attr
     * \param attr attribute name
     * \param value value as text (ns-3 syntax)
     * \return what was done
     */
    SetResult SetComponentAttribute(const std::string& cls,
                                    const std::string& attr,
                                    const std::string& value);

    /** \return true if \p cc names a registered congestion-control class */
    bool HasCongestionControl(TypeId cc) const;
    /** \return a congestion controller of class \p cc with the attributes set on it */
    Ptr<RdmaCongestionControl> CreateCongestionControl(TypeId cc);
    /** \return a steady-state fast-forward controller with the attributes set on it */
    Ptr<PacketFastForward> CreateFastForward();
    /** \return an episode cache (memoization) with the attributes set on it */
    Ptr<PacketEpisodeCache> CreateEpisodeCache();
    /**
     * \brief Select the load balancing of leaf and spine switches (LoadBalancer::Mode).
     * \param mode "ecmp" (no balancer) or a LoadBalancer mode name
     * \return false if \p mode names no mode
     */
    bool SetLoadBalancing(const std::string& mode);
    /** \return whether RdmaNic's Transport attribute, as set, is go-back-N (roce) */
    bool NicsGoBackN() const;
    /** \return a socket transport with the attributes set on it */
    Ptr<SocketTransport> CreateSocketTransport();
    /**
     * \brief Mark traffic classes lossy at every switch MMU built from now on.
     * \param mask bit p set: priority p is never paused (PFC) and may drop
     */
    void SetLossyPriorities(uint32_t mask);

    /**
     * \brief Create nodes, channels, devices, endpoints and switches of \p desc.
     * \param desc the topology
     * \param settings fabric settings
     * \return the objects created
     */
    PacketFabric Build(Ptr<TopologyDescription> desc, const PacketFabricSettings& settings);

  private:
    /**
     * Join the nodes of \p fabric by one QbbChannel and two QbbNetDevices per topology link
     * (global ports 2*l and 2*l+1), filling the port tables.
     */
    void BuildLinks(Ptr<TopologyDescription> desc,
                    const PacketFabricSettings& settings,
                    PacketFabric& fabric) const;
    /** \return the RdmaNic of GPU or NIC node \p node on \p ports, set up */
    Ptr<RdmaNic> BuildEndpoint(uint32_t node,
                               uint8_t kind,
                               const std::vector<Ptr<QbbNetDevice>>& ports,
                               const PacketFabricSettings& settings) const;
    /** \return the RdmaSwitch of switch node \p node with its MMU, marker and load balancer */
    Ptr<RdmaSwitch> BuildSwitch(uint32_t node,
                                uint8_t kind,
                                Ptr<TopologyDescription> desc,
                                const std::vector<Ptr<QbbNetDevice>>& ports,
                                const std::vector<uint32_t>& links,
                                const PacketFabricSettings& settings) const;

    ObjectFactory m_nicFactory;                         //!< RdmaNic
    ObjectFactory m_mmuFactory;                         //!< SwitchMmu
    ObjectFactory m_markerFactory;                      //!< RedEcnMarker
    ObjectFactory m_ffFactory;                          //!< PacketFastForward
    ObjectFactory m_memoFactory;                        //!< PacketEpisodeCache
    ObjectFactory m_socketFactory;                      //!< SocketTransport (socket hosts)
    ObjectFactory m_lbFactory;                          //!< LoadBalancer (not ECMP)
    ObjectFactory m_switchFactory;                      //!< RdmaSwitch
    std::map<std::string, ObjectFactory> m_ccFactories; //!< per CC TypeId name
};

} // namespace ns3

#endif /* HETEROSIM_PACKET_NETWORK_BUILDER_H */
