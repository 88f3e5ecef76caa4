/*
 * HeteroSim: RED-style ECN marking decision of a switch egress queue (DCQCN congestion point).
 */
#include "red-ecn-marker.h"

#include "ns3/boolean.h"
#include "ns3/double.h"
#include "ns3/log.h"
#include "ns3/uinteger.h"

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("RedEcnMarker");
NS_OBJECT_ENSURE_REGISTERED(RedEcnMarker);

TypeId
RedEcnMarker::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::RedEcnMarker")
            .SetParent<Object>()
            .SetGroupName("Heterosim")
            .AddConstructor<RedEcnMarker>()
            .AddAttribute("EcnKmin",
                          "Queue length below which nothing is marked, bytes (at EcnReferenceRate)",
                          UintegerValue(100000),
                          MakeUintegerAccessor(&RedEcnMarker::m_kmin),
                          MakeUintegerChecker<uint64_t>())
            .AddAttribute("EcnKmax",
                          "Queue length above which every packet is marked, bytes (at "
                          "EcnReferenceRate)",
                          UintegerValue(400000),
                          MakeUintegerAccessor(&RedEcnMarker::m_kmax),
                          MakeUintegerChecker<uint64_t>())
            .AddAttribute("EcnPmax",
                          "Marking probability at Kmax",
                          DoubleValue(0.2),
                          MakeDoubleAccessor(&RedEcnMarker::m_pmax),
                          MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("EcnReferenceRate",
                          "Port speed for which EcnKmin/EcnKmax are given",
                          DataRateValue(DataRate("25Gbps")),
                          MakeDataRateAccessor(&RedEcnMarker::m_referenceRate),
                          MakeDataRateChecker())
            .AddAttribute("EcnScaleWithRate",
                          "Scale EcnKmin/EcnKmax linearly with the port's line rate",
                          BooleanValue(true),
                          MakeBooleanAccessor(&RedEcnMarker::m_scale),
                          MakeBooleanChecker())
            .AddAttribute("EcnMarkAtEnqueue",
                          "Decide on the queue a packet joins (true) or leaves behind (false)",
                          BooleanValue(false),
                          MakeBooleanAccessor(&RedEcnMarker::m_atEnqueue),
                          MakeBooleanChecker())
            .AddAttribute("EcnSeed",
                          "Base seed of the marking random stream",
                          UintegerValue(12345),
                          MakeUintegerAccessor(&RedEcnMarker::m_seed),
                          MakeUintegerChecker<uint64_t>());
    return tid;
}

RedEcnMarker::RedEcnMarker()
{
    NS_LOG_FUNCTION(this);
}

double
RedEcnMarker::GetProbability(uint64_t queueBytes, uint64_t rateBps) const
{
    double scale = 1.0;
    if (m_scale && m_referenceRate.GetBitRate() > 0)
    {
        scale = static_cast<double>(rateBps) / static_cast<double>(m_referenceRate.GetBitRate());
    }
    double kmin = static_cast<double>(m_kmin) * scale;
    double kmax = static_cast<double>(m_kmax) * scale;
    double q = static_cast<double>(queueBytes);
    if (q <= kmin)
    {
        return 0.0;
    }
    if (q > kmax)
    {
        return 1.0;
    }
    return m_pmax * (q - kmin) / (kmax - kmin);
}

void
RedEcnMarker::SetStream(uint64_t stream)
{
    // splitmix64 of (seed, stream): a non-zero xorshift state
    uint64_t z = m_seed * 0x9E3779B97F4A7C15ULL + (stream + 1) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    m_state = z != 0 ? z : 0x2545F4914F6CDD1DULL;
}

double
RedEcnMarker::Uniform()
{
    if (m_state == 0)
    {
        SetStream(0);
    }
    m_state ^= m_state << 13;
    m_state ^= m_state >> 7;
    m_state ^= m_state << 17;
    return static_cast<double>(m_state >> 11) * (1.0 / 9007199254740992.0);
}

bool
RedEcnMarker::ShouldMark(uint64_t queueBytes, uint64_t rateBps)
{
    double p = GetProbability(queueBytes, rateBps);
    if (p <= 0.0)
    {
        return false;
    }
    if (p >= 1.0)
    {
        return true;
    }
    return Uniform() < p;
}

bool
RedEcnMarker::MarksAtEnqueue() const
{
    return m_atEnqueue;
}

} // namespace ns3
