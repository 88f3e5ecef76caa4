/*
 * HeteroSim: periodic samples of a packet network's queues and queue-pair rates.
 */
#ifndef HETEROSIM_PACKET_NETWORK_SAMPLER_H
#define HETEROSIM_PACKET_NETWORK_SAMPLER_H

#include "ns3/callback.h"
#include "ns3/event-id.h"
#include "ns3/nstime.h"
#include "ns3/qbb-net-device.h"
#include "ns3/rdma-queue-pair.h"
#include "ns3/socket-transport.h"
#include "ns3/topology-description.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace ns3
{

class EventImpl;

/**
 * \brief Samples a packet network every SampleInterval (PacketNetwork attributes
 * SampleInterval and SampleAllPorts): the data queue and cumulative wire bytes of each sampled
 * port, and the congestion-control rate and acknowledged bytes of each queue pair that has
 * data to send (socket-transport messages too, see SocketTransport::AppendProgress).
 *
 * Samples fall on multiples of the interval. The first is armed when a flow starts; sampling
 * goes on while the network has unfinished flows. Sampled ports are every port
 * (SampleAllPorts) or those on access and fabric links except GPU ends. Only queue pairs not
 * yet finished are visited, so a sample costs the live queue pairs, not every flow so far.
 */
class PacketNetworkSampler
{
  public:
    /** \brief The queue series: one row per sampled port and sample time. */
    struct QueueSeries
    {
        std::vector<int64_t> timeNs;   //!< sample time
        std::vector<uint32_t> port;    //!< global port
        std::vector<uint64_t> bytes;   //!< data queue bytes
        std::vector<uint64_t> txBytes; //!< cumulative wire bytes sent by the port
    };

    /** \brief The rate series: one row per active queue pair (or message) and sample time. */
    struct RateSeries
    {
        std::vector<int64_t> timeNs;      //!< sample time
        std::vector<uint32_t> flow;       //!< flow id
        std::vector<double> rateBps;      //!< congestion-control rate
        std::vector<uint64_t> bytesAcked; //!< bytes acknowledged so far
    };

    PacketNetworkSampler();
    ~PacketNetworkSampler();

    /**
     * \brief Choose the ports and the period (a network being built).
     * \param desc the topology
     * \param ports global port -> device
     * \param qps the queue-pair table
     * \param socket the socket transport (null when every host uses RDMA)
     * \param interval sampling period (0: no sampling)
     * \param allPorts sample every port (else access/fabric ports except GPU ends)
     * \param pending returns true while the network has unfinished flows
     */
    void Setup(Ptr<TopologyDescription> desc,
               const std::vector<Ptr<QbbNetDevice>>* ports,
               const std::vector<std::unique_ptr<RdmaQueuePair>>* qps,
               Ptr<SocketTransport> socket,
               Time interval,
               bool allPorts,
               Callback<bool> pending);

    /** \return true if the interval is positive */
    bool IsEnabled() const;
    /** \brief A queue pair was created (its rate is sampled until it finishes). \param slot */
    void AddQueuePair(uint32_t slot);
    /** \brief Schedule the next sample if sampling is on and none is pending. */
    void Arm();
    /**
     * \brief Move the pending sample \p deltaNs later (PacketFastForward); see ShiftEventId.
     * \param deltaNs shift, ns (0: only report the event)
     * \param moved receives the event moved
     */
    void ShiftClock(int64_t deltaNs, std::vector<const EventImpl*>* moved);
    /** \brief Cancel the pending sample and forget the network (series are kept). */
    void Stop();

    /** \return the queue series */
    const QueueSeries& GetQueueSeries() const;
    /** \return the rate series */
    const RateSeries& GetRateSeries() const;

  private:
    /** Take one sample of queues and rates. */
    void Sample();

    Time m_interval;                                                   //!< 0 = no sampling
    const std::vector<Ptr<QbbNetDevice>>* m_ports{nullptr};            //!< port devices
    const std::vector<std::unique_ptr<RdmaQueuePair>>* m_qps{nullptr}; //!< queue pairs
    Ptr<SocketTransport> m_socket;                                     //!< socket hosts' transport
    Callback<bool> m_pending;                                          //!< unfinished flows?
    std::vector<uint32_t> m_samplePorts;                               //!< ports sampled
    std::vector<uint32_t> m_liveSlots; //!< queue pairs not yet finished
    EventId m_event;                   //!< next sample
    QueueSeries m_queue;               //!< queue series
    RateSeries m_rate;                 //!< rate series
};

} // namespace ns3

#endif /* HETEROSIM_PACKET_NETWORK_SAMPLER_H */
