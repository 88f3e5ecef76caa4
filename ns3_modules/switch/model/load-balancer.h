/*
 * HeteroSim: per-switch choice of an egress port among equal-cost ports (load balancing).
 */
#ifndef HETEROSIM_LOAD_BALANCER_H
#define HETEROSIM_LOAD_BALANCER_H

#include "ns3/nstime.h"
#include "ns3/object.h"
#include "ns3/qbb-net-device.h"
#include "ns3/rdma-frame.h"
#include "ns3/traced-callback.h"

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace ns3
{

/**
 * \brief Chooses the egress port of an RDMA data frame among a switch's equal-cost ports
 * towards its destination, for every mode but ECMP (which RdmaSwitch does itself by hash, so
 * an ECMP switch has no LoadBalancer and its forwarding is unchanged).
 *
 * Modes (attribute Mode):
 * - Flowlet: a flow keeps its port while its packets arrive less than FlowletGap apart; a
 *   longer gap starts a new flowlet on a port drawn at random (LetFlow: Vanini et al., "Let It
 *   Flow: Resilient Asymmetric Load Balancing with Flowlet Switching", NSDI 2017; flowlets:
 *   Kandula et al., "Dynamic load balancing without packet reordering", CCR 2007).
 * - Adaptive: every packet takes the port whose egress queue drains first (queued bytes over
 *   port rate), from local state only (DRILL: Ghorbani et al., "DRILL: Micro Load Balancing for
 *   Low-latency Data Center Networks", SIGCOMM 2017, which samples two ports; here all ports
 *   of the set are compared, as a switch ASIC's adaptive routing does); ties are broken from
 *   a random starting port.
 * - AdaptiveFlowlet: a new flowlet (gap as above) takes the port whose queue drains first
 *   (CONGA's flowlet granularity with local instead of path-wide congestion: Alizadeh et al.,
 *   "CONGA: Distributed Congestion-Aware Load Balancing for Datacenters", SIGCOMM 2014).
 * - SprayRandom: every packet on a port drawn at random (random packet spraying: Dixit et
 *   al., "On the Impact of Packet Spraying in Data Center Networks", INFOCOM 2013).
 * - SprayRoundRobin: every packet on the next port of the set, one counter per destination.
 *
 * Randomness comes from a splitmix64 stream per switch, seeded from the run's seed and the
 * switch's node id, so a run is reproducible.
 *
 * APPROXIMATION: queue state is read at the instant of the choice with no sampling delay or
 * quantisation (ASICs quantise queue depth into a few levels and refresh it every few ns);
 * the flowlet table has one entry per queue pair, without the hash collisions of a real
 * fixed-size table.
 */
class LoadBalancer : public Object
{
  public:
    /** Load-balancing modes. */
    enum Mode
    {
        FLOWLET = 1,
        ADAPTIVE = 2,
        ADAPTIVE_FLOWLET = 3,
        SPRAY_RANDOM = 4,
        SPRAY_ROUND_ROBIN = 5,
    };

    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    LoadBalancer();
    ~LoadBalancer() override;

    /**
     * \brief Wire the balancer to its switch.
     * \param ports the switch's devices, in port order
     * \param stream random stream (seed and node id)
     * \param nNodes number of topology nodes (destinations)
     */
    void Setup(const std::vector<Ptr<QbbNetDevice>>& ports, uint64_t stream, uint32_t nNodes);

    /**
     * \brief Choose the egress port of a data frame.
     * \param frame the frame (its queue-pair slot keys the flowlet table, its destination
     * node the round-robin counter)
     * \param set equal-cost ports (two or more)
     * \return the chosen port
     */
    uint32_t Select(const RdmaFrame* frame, const std::vector<uint16_t>& set);

    /** \return the configured mode */
    Mode GetMode() const;
    /** \return flowlets started (Flowlet and AdaptiveFlowlet modes) */
    uint64_t GetFlowlets() const;

  protected:
    void DoDispose() override;

  private:
    /** State of one flow's current flowlet. */
    struct Flowlet
    {
        int64_t lastNs; //!< arrival of the flow's last packet
        uint16_t port;  //!< port of the current flowlet
    };

    /** \return the next 64 random bits (splitmix64) */
    uint64_t Next();
    /** \return a port of \p set drawn at random */
    uint32_t RandomPort(const std::vector<uint16_t>& set);
    /** \return the port of \p set whose queue (priority \p prio) drains first */
    uint32_t LeastLoaded(const std::vector<uint16_t>& set, uint8_t prio);
    /** \return the port of the frame's flowlet, starting a new one after a gap */
    uint32_t FlowletPort(const RdmaFrame* frame, const std::vector<uint16_t>& set);

    Mode m_mode{SPRAY_RANDOM};                         //!< attribute Mode
    Time m_flowletGap;                                 //!< attribute FlowletGap
    std::vector<QbbNetDevice*> m_ports;                //!< devices
    std::vector<uint32_t> m_rr;                        //!< round-robin position per destination
    std::unordered_map<uint32_t, Flowlet> m_flows;     //!< queue-pair slot -> flowlet
    uint64_t m_state{0};                               //!< splitmix64 state
    uint64_t m_flowlets{0};                            //!< flowlets started
    TracedCallback<uint32_t, uint32_t> m_flowletTrace; //!< queue-pair slot, port of a new flowlet
};

} // namespace ns3

#endif /* HETEROSIM_LOAD_BALANCER_H */
