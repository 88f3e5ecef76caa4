/*
 * HeteroSim: the receiver's credit pacer of RCCC (UET receiver-credit congestion control).
 */
#ifndef HETEROSIM_RCCC_PACER_H
#define HETEROSIM_RCCC_PACER_H

#include "rdma-queue-pair.h"

#include "ns3/callback.h"
#include "ns3/event-id.h"
#include "ns3/object.h"

#include <cstdint>
#include <vector>

namespace ns3
{

/**
 * \brief Grants RCCC credit (Rccc) for one receiving port of an RdmaNic: one packet of credit
 * per tick, round robin over the queue pairs still owed credit, a tick being the wire time of a
 * full data frame at a share of the port's rate (RdmaNic RcccShare), so the credited data
 * arrives at the downlink's rate, split equally among its senders. A queue pair is owed credit
 * up to the backlog its REQUEST frames announced (RdmaQueuePair::creditWant) beyond what was
 * granted (RdmaQueuePair::creditEnd). The credit outstanding at the port (granted, initial
 * credit included, and not yet arrived) is held to one bandwidth-delay product of the downlink
 * (its payload share, as grants count payload):
 * more would only queue at the last hop (several senders' initial credit arriving at once), so
 * grants pause until arrivals bring it below (the window of a receiver-driven transport, Homa's
 * RTTbytes: Montazeri et al., SIGCOMM 2018). The pacer runs only while some queue pair is owed
 * credit.
 */
class RcccPacer : public Object
{
  public:
    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    RcccPacer();

    /**
     * \brief Set the pacer up.
     * \param rateBps the rate the grants fill (a share of the receiving port's), bit/s
     * \param mtu payload bytes per packet (one grant)
     * \param overheadBytes wire bytes of a data frame beyond its payload
     * \param grant called to send a CREDIT frame for a queue pair (its creditEnd updated)
     */
    void Setup(double rateBps,
               uint32_t mtu,
               uint32_t overheadBytes,
               Callback<void, RdmaQueuePair*> grant);

    /**
     * \brief A REQUEST of \p qp arrived (creditWant already updated): owe it credit. The
     * first request of a queue pair adds its initial credit not yet arrived to the outstanding.
     * \param qp the queue pair
     * \param initialCredit its initial credit, bytes
     * \param bdpBytes the downlink's bandwidth-delay product on its path, wire bytes
     */
    void Request(RdmaQueuePair* qp, uint64_t initialCredit, uint64_t bdpBytes);

    /**
     * \brief Data of a queue pair this pacer credits arrived.
     * \param bytes payload bytes
     */
    void Arrived(uint32_t bytes);

    /** \return credits granted so far */
    uint64_t GetGrants() const;

  protected:
    void DoDispose() override;

  private:
    /** Grant one packet of credit to the next queue pair owed some; schedule the next tick. */
    void Tick();
    /** Grant now, or at the end of the current tick, if credit is owed and may go out. */
    void Wake();

    double m_rateBps{0};                    //!< receiving port rate, bit/s
    uint32_t m_mtu{0};                      //!< bytes per grant
    uint32_t m_overhead{0};                 //!< wire bytes beyond the payload
    Callback<void, RdmaQueuePair*> m_grant; //!< sends a CREDIT frame
    std::vector<RdmaQueuePair*> m_owed;     //!< queue pairs owed credit, round robin
    std::size_t m_next{0};                  //!< round-robin position
    EventId m_tick;                         //!< next grant
    double m_carry{0};                      //!< sub-ns remainder of the tick
    int64_t m_readyNs{0};                   //!< earliest time of the next grant, ns
    uint64_t m_outstanding{0};              //!< credit granted and not yet arrived, bytes
    uint64_t m_cap{0};                      //!< most credit outstanding: one downlink BDP, bytes
    uint64_t m_grants{0};                   //!< credits granted
};

} // namespace ns3

#endif /* HETEROSIM_RCCC_PACER_H */
