/*
 * HeteroSim: a helper that writes every trace source of QBB devices to a text stream.
 */
#include "qbb-trace-helper.h"

#include "ns3/callback.h"
#include "ns3/log.h"
#include "ns3/simulator.h"

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("QbbTraceHelper");

NS_OBJECT_ENSURE_REGISTERED(QbbTraceHelper);

TypeId
QbbTraceHelper::GetTypeId()
{
    static TypeId tid = TypeId("ns3::QbbTraceHelper")
                            .SetParent<Object>()
                            .SetGroupName("HeteroSim")
                            .AddConstructor<QbbTraceHelper>();
    return tid;
}

void
QbbTraceHelper::Enable(Ptr<OutputStreamWrapper> stream,
                       Ptr<QbbNetDevice> device,
                       const std::string& name)
{
    NS_LOG_FUNCTION(this << device << name);
    NS_ABORT_MSG_IF(!stream || !device, "QbbTraceHelper::Enable needs a stream and a device");
    m_sinks.push_back(std::make_unique<Sink>(Sink{stream, name, this}));
    Sink* sink = m_sinks.back().get();
    device->TraceConnectWithoutContext("Enqueue",
                                       MakeBoundCallback(&QbbTraceHelper::Queue, sink, "Enqueue"));
    device->TraceConnectWithoutContext("Dequeue",
                                       MakeBoundCallback(&QbbTraceHelper::Queue, sink, "Dequeue"));
    device->TraceConnectWithoutContext("Drop",
                                       MakeBoundCallback(&QbbTraceHelper::Frame, sink, "Drop"));
    device->TraceConnectWithoutContext("Mark",
                                       MakeBoundCallback(&QbbTraceHelper::Frame, sink, "Mark"));
    device->TraceConnectWithoutContext("Pause", MakeBoundCallback(&QbbTraceHelper::Pause, sink));
    device->TraceConnectWithoutContext("LinkState",
                                       MakeBoundCallback(&QbbTraceHelper::LinkState, sink));
}

uint64_t
QbbTraceHelper::GetEvents() const
{
    return m_events;
}

std::ostream&
QbbTraceHelper::Line(Sink* sink, const char* event)
{
    ++sink->helper->m_events;
    std::ostream& os = *sink->stream->GetStream();
    os << Simulator::Now().GetNanoSeconds() << ' ' << sink->name << ' ' << event;
    return os;
}

void
QbbTraceHelper::Queue(Sink* sink, const char* event, const RdmaFrame* frame, uint64_t bytes)
{
    Line(sink, event) << ' ' << unsigned(frame->type) << ' ' << frame->flow << ' ' << frame->seq
                      << ' ' << frame->wireBytes << ' ' << bytes << '\n';
}

void
QbbTraceHelper::Frame(Sink* sink, const char* event, const RdmaFrame* frame)
{
    Line(sink, event) << ' ' << unsigned(frame->type) << ' ' << frame->flow << ' ' << frame->seq
                      << ' ' << frame->wireBytes << '\n';
}

void
QbbTraceHelper::Pause(Sink* sink, uint8_t priority, uint16_t quanta, bool sent)
{
    Line(sink, "Pause") << ' ' << unsigned(priority) << ' ' << quanta << ' '
                        << (sent ? "sent" : "received") << '\n';
}

void
QbbTraceHelper::LinkState(Sink* sink, bool up)
{
    Line(sink, "LinkState") << ' ' << (up ? "up" : "down") << '\n';
}

} // namespace ns3
