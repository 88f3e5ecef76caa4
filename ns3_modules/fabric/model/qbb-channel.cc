/*
 * HeteroSim: full-duplex point-to-point link of the RDMA fabric.
 */
#include "qbb-channel.h"

#include "qbb-device-event.h"
#include "qbb-net-device.h"

#include "ns3/assert.h"
#include "ns3/log.h"
#include "ns3/simulator.h"

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("QbbChannel");
NS_OBJECT_ENSURE_REGISTERED(QbbChannel);

TypeId
QbbChannel::GetTypeId()
{
    static TypeId tid = TypeId("ns3::QbbChannel")
                            .SetParent<Channel>()
                            .SetGroupName("Heterosim")
                            .AddConstructor<QbbChannel>()
                            .AddAttribute("Delay",
                                          "Propagation delay of the link (each direction)",
                                          TimeValue(NanoSeconds(1000)),
                                          MakeTimeAccessor(&QbbChannel::m_delay),
                                          MakeTimeChecker());
    return tid;
}

QbbChannel::QbbChannel()
{
    NS_LOG_FUNCTION(this);
}

void
QbbChannel::Attach(Ptr<QbbNetDevice> device)
{
    NS_ASSERT_MSG(m_n < 2, "a QbbChannel joins exactly two devices");
    m_dev[m_n++] = device;
}

void
QbbChannel::Transmit(RdmaFrame* frame, const QbbNetDevice* src, Time txTime) const
{
    QbbNetDevice* peer =
        PeekPointer(m_dev[0]) == src ? PeekPointer(m_dev[1]) : PeekPointer(m_dev[0]);
    Simulator::Schedule(txTime + m_delay, QbbDeviceEvent::Receive(peer, frame));
}

Time
QbbChannel::GetDelay() const
{
    return m_delay;
}

std::size_t
QbbChannel::GetNDevices() const
{
    return m_n;
}

Ptr<NetDevice>
QbbChannel::GetDevice(std::size_t i) const
{
    return i < m_n ? Ptr<NetDevice>(m_dev[i]) : Ptr<NetDevice>();
}

void
QbbChannel::DoDispose()
{
    m_dev[0] = nullptr;
    m_dev[1] = nullptr;
    m_n = 0;
    Channel::DoDispose();
}

} // namespace ns3
