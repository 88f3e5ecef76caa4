/*
 * HeteroSim: a helper that writes every trace source of QBB devices to a text stream.
 */
#ifndef HETEROSIM_QBB_TRACE_HELPER_H
#define HETEROSIM_QBB_TRACE_HELPER_H

#include "ns3/object.h"
#include "ns3/output-stream-wrapper.h"
#include "ns3/ptr.h"
#include "ns3/qbb-net-device.h"

#include <memory>
#include <string>
#include <vector>

namespace ns3
{

/**
 * \ingroup heterosim
 * \brief Connects the trace sources of a QbbNetDevice (Enqueue, Dequeue, Drop, Mark, Pause,
 * LinkState) to one ASCII stream, one line per event, as ns-3's AsciiTraceHelper does for its
 * devices:
 *
 *     <time ns> <device name> <event> <fields...>
 *
 * with the fields: Enqueue/Dequeue: frame type, flow slot, sequence, wire bytes, data queue
 * bytes after; Drop/Mark: frame type, flow slot, sequence, wire bytes; Pause: priority, quanta,
 * "sent" or "received"; LinkState: "up" or "down". The name is the one given to Enable (a host NIC
 * or a switch port). Every line counts in GetEvents, so a caller (or a test) knows what was
 * written.
 */
class QbbTraceHelper : public Object
{
  public:
    /**
     * \brief Register this type.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    QbbTraceHelper() = default;

    /**
     * \brief Write the events of \p device to \p stream from now on.
     * \param stream the output (ns-3's OutputStreamWrapper, e.g. from AsciiTraceHelper)
     * \param device the port to trace
     * \param name the name its lines carry
     */
    void Enable(Ptr<OutputStreamWrapper> stream, Ptr<QbbNetDevice> device, const std::string& name);

    /**
     * \brief Lines written so far, all devices.
     * \return the count
     */
    uint64_t GetEvents() const;

  private:
    /** One traced device: where its lines go and what they are called. */
    struct Sink
    {
        Ptr<OutputStreamWrapper> stream; //!< the output
        std::string name;                //!< the device's name in each line
        QbbTraceHelper* helper;          //!< the owner (counts the lines)
    };

    static void Queue(Sink* sink, const char* event, const RdmaFrame* frame, uint64_t bytes);
    static void Frame(Sink* sink, const char* event, const RdmaFrame* frame);
    static void Pause(Sink* sink, uint8_t priority, uint16_t quanta, bool sent);
    static void LinkState(Sink* sink, bool up);
    static std::ostream& Line(Sink* sink, const char* event);

    std::vector<std::unique_ptr<Sink>> m_sinks; //!< one per enabled device
    uint64_t m_events{0};                       //!< lines written
};

} // namespace ns3

#endif // HETEROSIM_QBB_TRACE_HELPER_H
