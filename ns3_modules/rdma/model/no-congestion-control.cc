/*
 * HeteroSim: no congestion control (line rate).
 */
#include "no-congestion-control.h"

#include "ns3/log.h"

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("NoCongestionControl");
NS_OBJECT_ENSURE_REGISTERED(NoCongestionControl);

TypeId
NoCongestionControl::GetTypeId()
{
    static TypeId tid = TypeId("ns3::NoCongestionControl")
                            .SetParent<RdmaCongestionControl>()
                            .SetGroupName("Heterosim")
                            .AddConstructor<NoCongestionControl>();
    return tid;
}

NoCongestionControl::NoCongestionControl()
{
    NS_LOG_FUNCTION(this);
}

} // namespace ns3
