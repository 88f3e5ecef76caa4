/*
 * HeteroSim: link faults at simulated times (down, degraded rate, random loss).
 */
#ifndef HETEROSIM_FAULT_SCHEDULE_H
#define HETEROSIM_FAULT_SCHEDULE_H

#include "flow-network.h"

#include "ns3/nstime.h"
#include "ns3/object.h"
#include "ns3/ptr.h"
#include "ns3/traced-callback.h"

#include <cstdint>
#include <vector>

namespace ns3
{

/**
 * \brief Applies link fault events to a FlowNetwork at their simulated times.
 *
 * Events are added before the run (AddLinkEvent) and scheduled by Start(), which must be called
 * before the plan executor's Start() so that events at time 0 take effect before any flow
 * starts. Each event belongs to one fault (an index of the caller's); per fault the schedule
 * counts the active flows the network moved to another path. Kinds: LINK_DOWN, LINK_UP (the
 * end of a down window), RATE (value = new rate in bit/s), LOSS (value = frame loss
 * probability, value2 = goodput factor for fluid models).
 *
 * A link going down or up changes the link at once; the routes follow RoutingDelay later
 * (FlowNetwork::Reroute), the time the fabric takes to notice and converge. Until then
 * traffic hashed onto a down link is lost (packet) or stalled (fluid).
 */
class FaultSchedule : public Object
{
  public:
    /** Event kinds. */
    enum Kind : uint8_t
    {
        LINK_DOWN = 0,
        LINK_UP = 1,
        RATE = 2,
        LOSS = 3
    };

    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    /** Trace signature of Applied: fault index, kind, link. */
    typedef void (*AppliedCallback)(uint32_t, uint8_t, uint32_t);

    FaultSchedule();

    /**
     * \brief Add one event.
     * \param timeNs simulated time, ns
     * \param kind a Kind
     * \param link topology link
     * \param value rate (RATE) or probability (LOSS)
     * \param value2 goodput factor (LOSS)
     * \param fault the caller's fault index
     */
    void AddLinkEvent(
        int64_t timeNs, uint8_t kind, uint32_t link, double value, double value2, uint32_t fault);

    /**
     * \brief Schedule every event on \p network.
     * \param network the network the faults act on
     */
    void Start(Ptr<FlowNetwork> network);

    /** \param fault a fault index \return active flows moved to another path by its events */
    uint64_t GetRerouted(uint32_t fault) const;
    /** \return events applied so far */
    uint32_t GetApplied() const;

  protected:
    void DoDispose() override;

  private:
    /** One event. */
    struct Event
    {
        int64_t timeNs; //!< when
        uint8_t kind;   //!< Kind
        uint32_t link;  //!< topology link
        double value;   //!< rate or probability
        double value2;  //!< goodput factor
        uint32_t fault; //!< caller's fault index
    };

    /** Apply event \p i. */
    void Apply(uint32_t i);
    /** Routing converged after a link change of fault \p fault. */
    void Reroute(uint32_t fault);

    Ptr<FlowNetwork> m_network;                                 //!< target
    Time m_routingDelay;                                        //!< link change -> routes follow
    std::vector<Event> m_events;                                //!< events, in the order added
    std::vector<uint64_t> m_rerouted;                           //!< per fault
    uint32_t m_applied{0};                                      //!< events applied
    TracedCallback<uint32_t, uint8_t, uint32_t> m_appliedTrace; //!< fault, kind, link
};

} // namespace ns3

#endif /* HETEROSIM_FAULT_SCHEDULE_H */
